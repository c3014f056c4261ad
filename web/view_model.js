// The Model tab: the job's tensors by collection; the one picked is shown
// over steps, TRAIN and EVAL side by side (a scalar as a line, any other
// tensor or a TensorBoard histogram as its mean, norm, min and max). A
// TensorBoard tag is shown with the tags of the same series in the other
// modes (train/loss with eval/loss, train_loss with val_loss).

import {api, jobPath} from './api.js';
import {el, replace, card, errorBox} from './dom.js';
import {timeChart, PALETTE} from './charts.js';
import {throttle} from './throttle.js';

export function mountModel(container, context) {
  const filter = el('input', {type: 'search', id: 'tensor-filter', placeholder: 'Filter tensors…', 'aria-label': 'Filter tensors'});
  const list = el('div', {class: 'tensor-list', id: 'tensor-list'}, el('p', {class: 'loading'}, 'Loading…'));
  const view = el('div', {id: 'tensor-view'}, el('p', {class: 'muted'}, 'Pick a tensor on the left.'));
  const errors = el('div');
  container.append(errors, el('div', {class: 'model'},
      card('Tensors', filter, list), el('div', {class: 'tensor-main'}, view)));
  let tensors = null;
  let picked = null;
  let charts = [];

  function renderList() {
    if (!tensors) return;
    const text = filter.value.toLowerCase();
    const collections = tensors.collections || [];
    const shown = collections.map((c) => ({name: c.name,
      tensors: c.tensors.filter((t) => t.toLowerCase().includes(text))})).filter((c) => c.tensors.length);
    replace(list, shown.length ? shown.map((c) => el('details', {class: 'collection', open: true},
        el('summary', {}, c.name, el('span', {class: 'muted small'}, ` ${c.tensors.length}`)),
        el('ul', {}, c.tensors.map((name) => el('li', {},
            el('button', {type: 'button', class: ['tensor', name === picked ? 'active' : ''],
              dataset: {tensor: name}, onclick: () => pick(name)}, name)))))) :
      el('p', {class: 'muted'}, collections.length ? 'No tensor matches.' : 'No tensors saved yet.'));
  }

  function info(name) {
    return (tensors && tensors.tensors || []).find((t) => t.name === name);
  }

  // The picked tensor and the TensorBoard tags of its series in the other
  // modes ("series" in the listing), the picked one first.
  function shownTensors() {
    const meta = info(picked);
    if (!meta || !meta.series) return [picked];
    const partners = (tensors.tensors || []).filter((t) => t.series === meta.series && t.name !== picked);
    return [picked, ...partners.map((t) => t.name)];
  }

  async function showTensor() {
    if (!picked) return;
    try {
      const names = shownTensors();
      const replies = await Promise.all(names.map((name) => api.get(jobPath(context.name, 'tensor') +
          `?name=${encodeURIComponent(name)}&mode=ALL&maxPoints=1000`)));
      charts.forEach((c) => c.destroy());
      const order = ['TRAIN', 'EVAL', 'GLOBAL'];
      const series = replies.flatMap((reply, i) => (reply.series || [])
          .filter((s) => order.includes(s.mode)).map((s) => ({...s, tensor: names[i]})));
      series.sort((a, b) => order.indexOf(a.mode) - order.indexOf(b.mode));
      const meta = info(picked);
      charts = series.map((s, i) => timeChart({title: names.length > 1 ? `${s.mode} · ${s.tensor}` : s.mode,
        time: false, id: series.findIndex((o) => o.mode === s.mode) === i ? `tensor-${s.mode}` : `tensor-${s.mode}-${i}`, height: 260,
        series: s.scalar ? [{label: s.tensor, stroke: PALETTE[0]}] :
          ['mean', 'norm', 'min', 'max'].map((k, j) => ({label: k, stroke: PALETTE[j]}))}));
      replace(view, card(picked,
          meta && el('p', {class: 'muted'}, meta.histogram ?
            `histogram · collections ${(meta.collections || []).join(', ')}` :
            `shape [${(meta.shape || []).join(', ')}] · collections ${(meta.collections || []).join(', ')}`),
          series.length ? el('div', {class: 'columns'}, charts.map((c) => c.root)) :
            el('p', {class: 'muted'}, 'No values saved for this tensor yet.')));
      charts.forEach((chart, i) => {
        chart.mount();
        const s = series[i];
        chart.setData(s.scalar ? [s.steps, s.value] : [s.steps, s.mean, s.norm, s.min, s.max]);
      });
      replace(errors);
    } catch (error) {
      replace(errors, errorBox(error));
    }
  }

  function pick(name) {
    picked = name;
    renderList();
    showTensor();
  }

  async function load() {
    try {
      tensors = await api.get(jobPath(context.name, 'tensors'));
      renderList();
      if (!picked) {
        const first = (tensors.tensors || []).find((t) => /loss/i.test(t.name)) || (tensors.tensors || [])[0];
        if (first) pick(first.name);
      } else {
        showTensor();
      }
      replace(errors);
    } catch (error) {
      replace(errors, errorBox(error));
      if (list.querySelector('.loading')) replace(list, el('p', {class: 'muted'}, 'The tensor list did not load.'));
    }
  }
  filter.addEventListener('input', renderList);
  const reload = throttle(load, 3000);
  const offs = [context.on('data', reload)];
  load();
  return () => {
    reload.cancel();
    offs.forEach((off) => off());
    charts.forEach((c) => c.destroy());
  };
}
