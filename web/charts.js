// Time charts on uPlot sharing one time range: drag-select or the mouse wheel
// zooms every chart of the group, shift-drag pans, a double click shows the
// whole range again. The group follows new data (its range grows with it)
// until the person zooms or pans: then "Follow live" turns off until they
// turn it on again. Each chart's element carries its x range in
// data-x-min/data-x-max.

import {el} from './dom.js';
import {formatValue} from './format.js';
import {markOnce} from './marks.js';

/* global uPlot */

export const PALETTE = ['#2f6fde', '#e0771b', '#2a9d5c', '#c33d4a', '#8a5cd1', '#1f9fb0',
  '#b8860b', '#d4569c', '#5b6b7c', '#6c9a1f', '#0f4c81', '#a0522d'];

/** A set of charts with one x range and a "Follow live" toggle. */
export class TimeGroup {
  constructor(syncKey) {
    this.syncKey = syncKey;
    this.members = new Set();  // {setRange(min, max), dataRange() -> [min, max] | null}
    this.follow = true;
    this.range = null;  // the zoomed range while not following
    this.shown = null;  // the range the charts show
    this.onFollowChange = () => {};
    // Called after the person changed the range (zoom, pan, "Show all"):
    // views fetch finer buckets for it.
    this.onRangeChange = () => {};
    this.checkbox = el('input', {type: 'checkbox', id: 'follow-live', checked: true});
    this.checkbox.addEventListener('change', () => this.setFollow(this.checkbox.checked));
    this.toggle = el('label', {class: 'follow'}, this.checkbox, ' Follow live');
  }

  add(member) {
    this.members.add(member);
    return () => this.members.delete(member);
  }

  setFollow(follow) {
    this.follow = follow;
    this.checkbox.checked = follow;
    if (follow) this.range = null;
    this.apply();
    this.onFollowChange(follow);
    this.onRangeChange();
  }

  /** The person chose [min, max]: every chart shows it; following stops. */
  zoom(min, max) {
    if (!(max > min)) return;
    this.range = [min, max];
    if (this.follow) {
      this.follow = false;
      this.checkbox.checked = false;
      this.onFollowChange(false);
    }
    this.apply();
    this.onRangeChange();
  }

  /** The union of the members' data. */
  fullRange() {
    let min = Infinity;
    let max = -Infinity;
    for (const member of this.members) {
      const range = member.dataRange();
      if (!range) continue;
      min = Math.min(min, range[0]);
      max = Math.max(max, range[1]);
    }
    return min < max ? [min, max] : null;
  }

  /** Shows the current range (the zoom, or all data when following) on every chart. */
  apply() {
    const range = this.follow || !this.range ? this.fullRange() : this.range;
    if (!range) return;
    this.shown = range;
    for (const member of this.members) member.setRange(range[0], range[1]);
  }

  /**
   * After `member`'s data changed: it shows the current range, and so do the
   * others only if that range changed (a view filling N charts redraws each
   * once, not N times). Returns whether the member was given a range.
   */
  applyTo(member) {
    const range = this.follow || !this.range ? this.fullRange() : this.range;
    if (!range) return false;
    if (this.shown && this.shown[0] === range[0] && this.shown[1] === range[1]) {
      member.setRange(range[0], range[1]);
    } else {
      this.apply();
    }
    return true;
  }
}

function axisValues(unit) {
  return (u, ticks) => ticks.map((v) => (v === null ? '' : formatValue(v, unit)));
}

/**
 * A time chart: `series` [{label, stroke, fill?, unit?, show?}], `unit` of the
 * y axis, `yRange` [min, max] or null (auto). Returns {root, plot, setData}.
 * setData([t[], ...ys[]]) keeps the group's range.
 */
export function timeChart({title, series, unit, yRange = null, height = 200, group, id, legend = true,
  time = true}) {
  const root = el('div', {class: 'chart', id, dataset: {title}});
  const heading = title ? el('h3', {class: 'chart-title'}, title) : null;
  const wrapper = el('div', {class: 'chart-wrap'}, heading, root);
  let plot = null;
  let data = [[], ...series.map(() => [])];

  const opts = {
    width: 600, height,
    legend: {show: legend, live: true},
    cursor: {
      sync: group ? {key: group.syncKey, setSeries: false} : undefined,
      drag: {x: true, y: false, setScale: false},
      bind: {dblclick: () => () => { if (group) group.setFollow(true); return null; }},
    },
    select: {show: true},
    scales: {x: {time}, y: yRange ? {range: () => yRange} : {auto: true}},
    axes: [
      {stroke: '#4a5563', grid: {stroke: '#eef0f3'}, ticks: {stroke: '#d5d9df'}},
      {stroke: '#4a5563', grid: {stroke: '#eef0f3'}, ticks: {stroke: '#d5d9df'},
        values: axisValues(unit), size: unit === 'bytes_per_second' ? 90 : 70},
    ],
    series: [{label: time ? 'time' : 'step'}, ...series.map((s, i) => ({
      label: s.label, stroke: s.stroke || PALETTE[i % PALETTE.length], width: 1.5,
      // Buckets finer than the sampling interval are empty between samples: join them.
      fill: s.fill, show: s.show !== false, spanGaps: true,
      value: (u, v) => formatValue(v, s.unit || unit),
      paths: s.paths,
    }))],
    hooks: {
      setSelect: [(u) => {
        if (u.select.width <= 2) return;
        const min = u.posToVal(u.select.left, 'x');
        const max = u.posToVal(u.select.left + u.select.width, 'x');
        u.setSelect({left: 0, top: 0, width: 0, height: 0}, false);
        if (group) group.zoom(min, max);
        else u.setScale('x', {min, max});
      }],
      setScale: [(u, key) => {
        if (key !== 'x') return;
        root.dataset.xMin = String(u.scales.x.min);
        root.dataset.xMax = String(u.scales.x.max);
      }],
      ready: [(u) => bindWheelAndPan(u, group)],
      draw: [(u) => { if (u.data[0] && u.data[0].length) markOnce('dp-first-chart'); }],
    },
  };

  const member = {
    setRange: (min, max) => plot && plot.setScale('x', {min, max}),
    dataRange: () => {
      const t = data[0];
      return t.length ? [t[0], t[t.length - 1]] : null;
    },
  };

  function create() {
    const width = Math.max(300, root.clientWidth || wrapper.clientWidth || 600);
    opts.width = width;
    plot = new uPlot(opts, data, root);
  }

  const resize = new ResizeObserver(() => {
    const width = Math.floor(root.clientWidth);
    if (plot && width > 0 && Math.abs(width - plot.width) > 2) plot.setSize({width, height});
  });

  return {
    root: wrapper,
    get plot() { return plot; },
    /** Draws the chart once `wrapper` is in the document. */
    mount() {
      if (plot) return;
      create();
      resize.observe(root);
      if (group) group.add(member);
    },
    setData(next) {
      data = next;
      // How many points the chart has (for tests and tools: the chart is a canvas).
      root.dataset.points = String(data[0].length);
      if (!plot) return;
      plot.setData(data, false);
      if (group) group.applyTo(member);
      else if (data[0].length) plot.setScale('x', {min: data[0][0], max: data[0][data[0].length - 1]});
      plot.redraw(false, true);
    },
    setSeriesShown(index, shown) {
      if (plot) plot.setSeries(index + 1, {show: shown});
    },
    destroy() {
      resize.disconnect();
      if (group) group.members.delete(member);
      if (plot) plot.destroy();
    },
  };
}

/** Mouse wheel zooms around the cursor; shift-drag pans (the group's range). */
function bindWheelAndPan(u, group) {
  const zoomTo = (min, max) => (group ? group.zoom(min, max) : u.setScale('x', {min, max}));
  u.over.addEventListener('wheel', (event) => {
    if (!event.ctrlKey && !event.altKey) return;  // a plain wheel scrolls the page
    event.preventDefault();
    const {min, max} = u.scales.x;
    const at = u.posToVal(event.offsetX, 'x');
    const factor = event.deltaY < 0 ? 0.8 : 1.25;
    zoomTo(at - (at - min) * factor, at + (max - at) * factor);
  }, {passive: false});
  u.over.addEventListener('mousedown', (event) => {
    if (!event.shiftKey) return;
    event.stopPropagation();
    event.preventDefault();
    const startX = event.clientX;
    const {min, max} = u.scales.x;
    const perPixel = (max - min) / u.over.clientWidth;
    const move = (e) => zoomTo(min - (e.clientX - startX) * perPixel, max - (e.clientX - startX) * perPixel);
    const up = () => {
      window.removeEventListener('mousemove', move);
      window.removeEventListener('mouseup', up);
    };
    window.addEventListener('mousemove', move);
    window.addEventListener('mouseup', up);
  }, true);
}

/** A bar chart over steps (not time): `series` stacked or side by side. */
export function stepBars({title, label, unit, height = 200, id}) {
  const root = el('div', {class: 'chart', id});
  const wrapper = el('div', {class: 'chart-wrap'}, el('h3', {class: 'chart-title'}, title), root);
  let plot = null;
  let data = [[], []];
  const bars = uPlot.paths.bars({size: [0.7, 40]});
  const opts = {
    width: 600, height,
    legend: {show: true},
    cursor: {drag: {x: false, y: false}},
    scales: {x: {time: false}, y: {range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1]}},
    axes: [
      {stroke: '#4a5563', grid: {show: false}, label: 'step', labelSize: 20},
      {stroke: '#4a5563', grid: {stroke: '#eef0f3'}, values: axisValues(unit), size: 70},
    ],
    series: [{label: 'step'}, {label, stroke: PALETTE[0], fill: 'rgba(47,111,222,0.35)', paths: bars,
      points: {show: false}, value: (u, v) => formatValue(v, unit)}],
  };
  const resize = new ResizeObserver(() => {
    const width = Math.floor(root.clientWidth);
    if (plot && width > 0 && Math.abs(width - plot.width) > 2) plot.setSize({width, height});
  });
  return {
    root: wrapper,
    mount() {
      if (plot) return;
      opts.width = Math.max(300, root.clientWidth || 600);
      plot = new uPlot(opts, data, root);
      resize.observe(root);
    },
    setData(next) {
      data = next;
      // The steps shown, for tests and tools (the chart is a canvas).
      root.setAttribute('data-steps', (next[0] || []).join(' '));
      if (plot) plot.setData(data);
    },
    destroy() {
      resize.disconnect();
      if (plot) plot.destroy();
    },
  };
}
