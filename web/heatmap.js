// The system heatmap: every CPU and GPU of a node (rows) over time (columns),
// utilization as colour, drawn on a canvas. Follows the group's time range.

import {el} from './dom.js';
import {formatTime} from './format.js';
import {markOnce} from './marks.js';

// Yellow to dark red (ColorBrewer YlOrRd): light is idle, dark is busy.
const STOPS = [[0, [255, 255, 204]], [0.25, [254, 217, 118]], [0.5, [253, 141, 60]],
  [0.75, [227, 26, 28]], [1, [128, 0, 38]]];

/** The colour of a utilization 0..100 %. */
export function heatColor(percent) {
  const x = Math.min(1, Math.max(0, percent / 100));
  for (let i = 1; i < STOPS.length; i++) {
    const [p1, c1] = STOPS[i];
    const [p0, c0] = STOPS[i - 1];
    if (x <= p1) {
      const f = (x - p0) / (p1 - p0);
      return `rgb(${c0.map((c, k) => Math.round(c + (c1[k] - c) * f)).join(',')})`;
    }
  }
  return 'rgb(128,0,38)';
}

/** The colour of a utilization as an ImageData pixel (RGBA bytes, little-endian), from a table of 0.5 % steps. */
const PIXELS = new Uint32Array(201);
for (let i = 0; i <= 200; i++) {
  const [r, g, b] = heatColor(i / 2).match(/\d+/g).map(Number);
  PIXELS[i] = (255 << 24 | b << 16 | g << 8 | r) >>> 0;
}
function heatPixel(percent) {
  return PIXELS[Math.round(Math.min(100, Math.max(0, percent)) * 2)];
}

export function heatmap({title, group, id}) {
  const canvas = el('canvas', {class: 'heatmap', id, height: 10});
  const tip = el('div', {class: 'heat-tip', hidden: true});
  const scale = el('canvas', {class: 'heat-scale', width: 14, height: 160});
  const empty = el('p', {class: 'muted empty-chart'}, 'No per-device CPU or GPU metrics yet.');
  const wrapper = el('div', {class: 'chart-wrap heat'}, el('h3', {class: 'chart-title'}, title), empty,
      el('div', {class: 'heat-row'}, el('div', {class: 'heat-canvas'}, canvas, tip),
          el('div', {class: 'heat-legend'}, el('span', {}, '100 %'), scale, el('span', {}, '0 %'))));
  let rows = [];  // [{label, t: [], mean: []}]
  let range = null;
  const LABEL_WIDTH = 64;
  const ROW_HEIGHT = 14;

  function drawScale() {
    const ctx = scale.getContext('2d');
    for (let y = 0; y < scale.height; y++) {
      ctx.fillStyle = heatColor(100 * (1 - y / scale.height));
      ctx.fillRect(0, y, scale.width, 1);
    }
  }

  // The cells of every row as pixels (device pixels, one ImageData): a
  // fillRect per cell, with a colour string parsed for each, took most of a
  // Nodes view's first draw for 104 rows of 800 buckets.
  function drawCells(ctx, width, ratio, xOf) {
    const plotLeft = Math.round(LABEL_WIDTH * ratio);
    const plotRight = Math.round(width * ratio);
    const pixelsWide = plotRight - plotLeft;
    const rowPixels = Math.round(ROW_HEIGHT * ratio);
    if (pixelsWide <= 0 || !rows.length) return;
    const image = ctx.createImageData(pixelsWide, rows.length * rowPixels);
    const pixels = new Uint32Array(image.data.buffer);
    const line = new Uint32Array(pixelsWide);
    const margin = Math.max(1, Math.round(ratio));
    rows.forEach((row, r) => {
      line.fill(0);
      const step = row.t.length > 1 ? row.t[1] - row.t[0] : 0;
      // Buckets finer than the sampling interval are empty between samples:
      // a sample's cell reaches the next sample unless that is a real gap.
      const filled = [];
      for (let i = 0; i < row.t.length; i++) if (row.mean[i] !== null && row.mean[i] !== undefined) filled.push(i);
      const gaps = filled.slice(1).map((index, k) => row.t[index] - row.t[filled[k]]).sort((a, b) => a - b);
      const typical = gaps.length ? gaps[Math.floor(gaps.length / 2)] : step;
      for (let k = 0; k < filled.length; k++) {
        const i = filled[k];
        const next = k + 1 < filled.length ? row.t[filled[k + 1]] : row.t[i] + typical;
        const end = next - row.t[i] <= 3 * typical ? next : row.t[i] + (step || typical);
        const x0 = Math.max(0, Math.round(xOf(row.t[i]) * ratio) - plotLeft);
        const x1 = Math.min(pixelsWide, Math.max(x0 + 1, Math.round(xOf(end) * ratio) - plotLeft));
        if (x1 <= 0 || x0 >= pixelsWide) continue;
        line.fill(heatPixel(row.mean[i]), x0, x1);
      }
      for (let y = margin; y < rowPixels - margin; y++) pixels.set(line, (r * rowPixels + y) * pixelsWide);
    });
    ctx.putImageData(image, plotLeft, 0);
  }

  function draw() {
    scale.style.height = `${Math.max(48, rows.length * ROW_HEIGHT)}px`;
    const width = Math.max(300, canvas.parentElement ? canvas.parentElement.clientWidth : 600);
    const height = Math.max(ROW_HEIGHT, rows.length * ROW_HEIGHT) + 18;
    const ratio = window.devicePixelRatio || 1;
    canvas.width = width * ratio;
    canvas.height = height * ratio;
    canvas.style.width = `${width}px`;
    canvas.style.height = `${height}px`;
    const ctx = canvas.getContext('2d');
    const [min, max] = range || member.dataRange() || [0, 1];
    const plotWidth = width - LABEL_WIDTH;
    const xOf = (t) => LABEL_WIDTH + ((t - min) / (max - min)) * plotWidth;
    drawCells(ctx, width, ratio, xOf);
    ctx.scale(ratio, ratio);
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    ctx.fillStyle = '#4a5563';
    rows.forEach((row, r) => ctx.fillText(row.label, 4, r * ROW_HEIGHT + ROW_HEIGHT / 2));
    ctx.fillStyle = '#6b7480';
    ctx.fillText(formatTime(min), LABEL_WIDTH, height - 8);
    const end = formatTime(max);
    ctx.fillText(end, width - ctx.measureText(end).width - 2, height - 8);
    canvas.dataset.xMin = String(min);
    canvas.dataset.xMax = String(max);
    if (rows.length) markOnce('dp-first-chart');
  }

  canvas.addEventListener('mousemove', (event) => {
    const [min, max] = range || member.dataRange() || [0, 1];
    const row = rows[Math.floor(event.offsetY / ROW_HEIGHT)];
    const plotWidth = canvas.clientWidth - LABEL_WIDTH;
    if (!row || event.offsetX < LABEL_WIDTH) {
      tip.hidden = true;
      return;
    }
    const t = min + ((event.offsetX - LABEL_WIDTH) / plotWidth) * (max - min);
    let index = row.t.findIndex((start, i) => start <= t && (i + 1 >= row.t.length || row.t[i + 1] > t));
    const value = index >= 0 ? row.mean[index] : null;
    tip.hidden = false;
    tip.textContent = `${row.label} · ${formatTime(t)} · ${value === null || value === undefined ? 'no data' : value.toFixed(1) + ' %'}`;
    tip.style.left = `${Math.min(event.offsetX + 12, canvas.clientWidth - 220)}px`;
    tip.style.top = `${event.offsetY + 12}px`;
  });
  canvas.addEventListener('mouseleave', () => { tip.hidden = true; });

  const member = {
    setRange(min, max) {
      range = [min, max];
      draw();
    },
    dataRange() {
      let min = Infinity;
      let max = -Infinity;
      for (const row of rows) {
        if (!row.t.length) continue;
        min = Math.min(min, row.t[0]);
        max = Math.max(max, row.t[row.t.length - 1]);
      }
      return min < max ? [min, max] : null;
    },
  };
  // Redraw when the width changes (drawing changes the height: observing it would loop).
  let lastWidth = 0;
  const resize = new ResizeObserver(() => {
    const width = wrapper.clientWidth;
    if (width !== lastWidth) {
      lastWidth = width;
      requestAnimationFrame(draw);
    }
  });
  let off = null;
  return {
    root: wrapper,
    mount() {
      drawScale();
      resize.observe(wrapper);
      if (group) off = group.add(member);
    },
    setRows(next) {
      rows = next;
      empty.hidden = rows.length > 0;
      wrapper.querySelector('.heat-row').hidden = rows.length === 0;
      if (!(group && group.applyTo(member))) draw();
    },
    destroy() {
      resize.disconnect();
      if (off) off();
    },
  };
}
