// The Model tab: the job's tensors by collection; the one picked is shown
// over steps, TRAIN and EVAL side by side (a scalar as a line, any other
// tensor as its mean, norm, min and max).

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

  async function showTensor() {
    if (!picked) return;
    try {
      const reply = await api.get(jobPath(context.name, 'tensor') +
          `?name=${encodeURIComponent(picked)}&mode=ALL&maxPoints=1000`);
      charts.forEach((c) => c.destroy());
      const series = (reply.series || []).filter((s) => s.mode === 'TRAIN' || s.mode === 'EVAL' || s.mode === 'GLOBAL');
      series.sort((a, b) => ['TRAIN', 'EVAL', 'GLOBAL'].indexOf(a.mode) - ['TRAIN', 'EVAL', 'GLOBAL'].indexOf(b.mode));
      const meta = info(picked);
      charts = series.map((s) => timeChart({title: s.mode, time: false, id: `tensor-${s.mode}`, height: 260,
        series: s.scalar ? [{label: picked, stroke: PALETTE[0]}] :
          ['mean', 'norm', 'min', 'max'].map((k, i) => ({label: k, stroke: PALETTE[i]}))}));
      replace(view, card(picked,
          meta && el('p', {class: 'muted'}, `shape [${(meta.shape || []).join(', ')}] · collections ${(meta.collections || []).join(', ')}`),
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
