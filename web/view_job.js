// One job: its header (status, verdicts, tabs, profiling controls) and the
// tab shown (Overview, Nodes, Model). Keeps one event stream for the job and
// passes its updates to the tab.

import {api, jobPath, subscribe} from './api.js';
import {el, replace, badge, errorBox} from './dom.js';
import {formatAgo} from './format.js';
import {mountOverview} from './view_overview.js';
import {mountNodes} from './view_nodes.js';
import {mountModel} from './view_model.js';
import {ProfilingPanel} from './view_profiling.js';

const TABS = {overview: ['Overview', mountOverview], nodes: ['Nodes', mountNodes], model: ['Model', mountModel]};

/** A small event emitter: on(name, fn) returns a function that removes fn. */
class Emitter {
  constructor() { this.handlers = {}; }
  on(name, fn) {
    (this.handlers[name] ||= new Set()).add(fn);
    return () => this.handlers[name].delete(fn);
  }
  emit(name, value) {
    for (const fn of this.handlers[name] || []) fn(value);
  }
}

export function mountJob(container, name, initialTab) {
  const events = new Emitter();
  const context = {name, job: null, summary: null, on: (e, fn) => events.on(e, fn)};
  const title = el('h1', {class: 'job-name'}, name);
  const status = el('span', {id: 'job-status'});
  const verdicts = el('span', {class: 'verdicts', id: 'job-verdicts'});
  const lastData = el('span', {class: 'muted', id: 'job-last-data'});
  const live = el('span', {class: 'live off', id: 'live-state'}, 'connecting…');
  const tabs = el('nav', {class: 'tabs', role: 'tablist'});
  const body = el('div', {class: 'tab-body', id: 'tab-body'});
  const errors = el('div');
  const profiling = new ProfilingPanel(context);
  container.append(
      el('div', {class: 'toolbar job-header'}, title, status, verdicts, lastData,
          el('div', {class: 'spacer'}), live, profiling.button),
      tabs, errors, profiling.panel, body);

  let tab = null;
  let unmountTab = null;
  function setTab(next) {
    if (next === tab) return;
    tab = next;
    replace(tabs, Object.entries(TABS).map(([key, [label]]) =>
      el('a', {href: `#/jobs/${encodeURIComponent(name)}/${key}`, role: 'tab',
        class: key === tab ? 'active' : '', 'aria-selected': String(key === tab)}, label)));
    if (unmountTab) unmountTab();
    replace(body);
    unmountTab = TABS[tab][1](body, context);
  }

  function renderSummary() {
    const summary = context.summary;
    if (!summary) return;
    replace(status, badge(summary.status),
        summary.secondaryStatus && el('span', {class: 'muted small'}, ' ' + summary.secondaryStatus));
    const order = ['IssuesFound', 'Error', 'InProgress', 'NoIssuesFound', 'Stopping', 'Stopped'];
    replace(verdicts, Object.entries(summary.verdicts || {}).filter(([, n]) => n > 0)
        .sort(([a], [b]) => order.indexOf(a) - order.indexOf(b)).map(([v, n]) => el('span', {class: ['verdict', 'status-' + v]}, `${n} ${v}`)));
    lastData.textContent = summary.lastDataTime ? `data ${formatAgo(summary.lastDataTime)}` : 'no data yet';
  }

  async function loadJob() {
    try {
      context.job = await api.get(jobPath(name));
      replace(errors);
      events.emit('describe', context.job);
    } catch (error) {
      replace(errors, errorBox(error));
      if (error.status === 404) showMissing();
    }
  }

  // No such job (deleted, or a mistyped link): say so once, stop listening.
  function showMissing() {
    close();
    if (unmountTab) unmountTab();
    unmountTab = null;
    tabs.hidden = true;
    profiling.button.hidden = true;
    profiling.panel.hidden = true;
    live.hidden = true;
    replace(body, el('section', {class: 'card'}, el('h2', {}, 'No such training job'),
        el('p', {}, `The server has no training job named ${name}.`),
        el('a', {href: '#/jobs'}, 'Back to the jobs')));
  }

  let describeTimer = null;
  const close = subscribe({
    job: name,
    onJob: (summary) => {
      if (summary.name !== name) return;
      context.summary = summary;
      renderSummary();
      events.emit('job', summary);
      // The record changed (rules, profiler configuration): read it again.
      clearTimeout(describeTimer);
      describeTimer = setTimeout(loadJob, 100);
    },
    onData: (data) => {
      if (data.name !== name) return;
      if (context.summary) {
        context.summary.lastDataTime = data.lastDataTime;
        if (data.lastStep !== null && data.lastStep !== undefined) context.summary.currentStep = data.lastStep;
        renderSummary();
      }
      events.emit('data', data);
    },
    onState: (open) => {
      live.className = open ? 'live on' : 'live off';
      live.textContent = open ? 'live' : 'reconnecting…';
    },
  });
  const ticker = setInterval(renderSummary, 1000);
  loadJob();
  setTab(initialTab);

  const unmount = () => {
    close();
    clearInterval(ticker);
    clearTimeout(describeTimer);
    if (unmountTab) unmountTab();
    profiling.destroy();
  };
  unmount.setTab = setTab;
  return unmount;
}
