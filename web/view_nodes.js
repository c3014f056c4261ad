/* global uPlot */
// The Nodes tab: per node, CPU (mean and the cores the person picks) and
// network over time, GPU utilization and memory per device, a heatmap of
// every CPU and GPU, system metrics above framework phases, and the time
// per step of the last steps. All time charts share one range (zoom, pan)
// and follow new data until the person zooms.

import {api, jobPath} from './api.js';
import {el, replace, card, badge, errorBox, problemBox} from './dom.js';
import {timeChart, stepBars, TimeGroup, PALETTE} from './charts.js';
import {heatmap} from './heatmap.js';
import {throttle} from './throttle.js';
import {formatDuration} from './format.js';
import {markOnce, markAfterFrame} from './marks.js';

/** Series with their own t arrays on one x: [t[], ...values[]] (null where missing). */
export function align(seriesList, key = 'mean') {
  // The system reply's series share one t array (fields=mean): nothing to merge.
  if (seriesList.length && seriesList.every((s) => s.t === seriesList[0].t)) {
    return [seriesList[0].t, ...seriesList.map((s) => s[key])];
  }
  const times = [...new Set(seriesList.flatMap((s) => s.t))].sort((a, b) => a - b);
  const index = new Map(times.map((t, i) => [t, i]));
  return [times, ...seriesList.map((s) => {
    const values = new Array(times.length).fill(null);
    s.t.forEach((t, i) => { values[index.get(t)] = s[key][i]; });
    return values;
  })];
}

const deviceOrder = (a, b) => (a === 'total' ? -1 : b === 'total' ? 1 :
  a.localeCompare(b, undefined, {numeric: true}));

/** A chart whose series (by label) may change: rebuilt when they do. */
class SeriesChart {
  constructor(slot, options) {
    this.slot = slot;
    this.options = options;
    this.chart = null;
    this.labels = '';
  }
  /** list: [{label, t, values, stroke?}]; empty: the `empty` text instead of a chart. */
  update(list) {
    if (!list.length) {
      if (this.chart) this.chart.destroy();
      this.chart = null;
      this.labels = '';
      replace(this.slot, el('p', {class: 'muted empty-chart'}, this.options.empty || 'No data yet.'));
      return;
    }
    const labels = list.map((s) => s.label).join('|');
    if (labels !== this.labels || !this.chart) {
      if (this.chart) this.chart.destroy();
      this.labels = labels;
      this.chart = timeChart({...this.options,
        series: list.map((s, i) => ({label: s.label, stroke: s.stroke || PALETTE[i % PALETTE.length],
          fill: s.fill, paths: s.paths}))});
      replace(this.slot, this.chart.root);
      this.chart.mount();
    }
    this.chart.setData(align(list.map((s) => ({t: s.t, v: s.values})), 'v'));
  }
  destroy() {
    if (this.chart) this.chart.destroy();
  }
}

// A timestamp of the SageMaker JSON (epoch seconds), as a time of day.
const lostAt = (time) => (typeof time === 'number' ? new Date(time * 1000).toLocaleTimeString() : String(time));

/** The rows of the training hosts table (DescribeTrainingJob's TrainingHosts). */
export function hostRows(job) {
  return ((job && job.TrainingHosts) || []).map((h) => ({
    name: h.HostName,
    status: h.Status || 'Waiting',
    connected: Boolean(h.Connected),
    connection: h.Connected ? 'connected' : (h.DisconnectTime ? `lost at ${lostAt(h.DisconnectTime)}` : 'not connected'),
    step: h.CurrentStep === undefined ? '' : String(h.CurrentStep),
    how: h.EndMessage || '',
  }));
}

function renderHosts(slot, context) {
  const job = context.job;
  const rows = hostRows(job);
  const expected = Math.max(1, (job && job.ResourceConfig && job.ResourceConfig.InstanceCount) || 1);
  if (!rows.length) {
    replace(slot, el('p', {class: 'muted'}, job ? 'No agent has connected yet.' : 'Loading…'));
    return;
  }
  replace(slot, el('p', {class: 'hint'}, `${rows.length} of ${expected} expected host${expected > 1 ? 's' : ''}`),
      el('table', {class: 'hosts', id: 'training-hosts'},
          el('thead', {}, el('tr', {}, ...['Host', 'Status', 'Agent', 'Step', 'How it ended'].map((h) => el('th', {}, h)))),
          el('tbody', {}, ...rows.map((r) => el('tr', {'data-host': r.name, 'data-connected': String(r.connected)},
              el('td', {}, r.name), el('td', {}, badge(r.status)), el('td', {}, r.connection),
              el('td', {}, r.step), el('td', {}, r.how))))));
}

export function mountNodes(container, context) {
  const group = new TimeGroup(`nodes-${context.name}`);
  const nodeSelect = el('select', {id: 'node-select', 'aria-label': 'Node'});
  const errors = el('div');
  const coreBox = el('div', {class: 'chips', id: 'core-picker'});
  const slots = {
    cpu: el('div'), network: el('div'), gpu: el('div'), gpuMemory: el('div'),
    system: el('div'), framework: el('div'),
  };
  const heat = heatmap({title: 'CPU and GPU utilization', group, id: 'system-heatmap'});
  const steps = stepBars({title: 'Time per step (last steps)', label: 'step time', unit: 'seconds', id: 'step-times'});
  const stepsEmpty = el('p', {class: 'muted empty-chart'}, 'No steps profiled yet.');
  const resolution = el('span', {class: 'hint', id: 'series-resolution'});
  const resetButton = el('button', {type: 'button', class: 'secondary', id: 'reset-zoom',
    onclick: () => group.setFollow(true)}, 'Show all');
  const hosts = el('div', {id: 'hosts-card'});
  renderHosts(hosts, context);
  container.append(
      card('Training hosts', hosts),
      el('div', {class: 'toolbar sub'}, el('label', {for: 'node-select'}, 'Node'), nodeSelect,
          el('div', {class: 'spacer'}),
          el('span', {class: 'hint'}, 'Drag: zoom · Shift+drag: pan · Ctrl+wheel: zoom · double-click: all'),
          resolution, resetButton, group.toggle),
      errors,
      el('div', {class: 'columns'},
          card('CPU utilization', el('p', {class: 'hint'}, 'Mean over the cores; pick cores to compare:'), coreBox, slots.cpu),
          card('Network', slots.network)),
      el('div', {class: 'columns'}, card('GPU utilization', slots.gpu), card('GPU memory utilization', slots.gpuMemory)),
      card('Overall system utilization over time', heat.root),
      card('System metrics over time', slots.system, el('h3', {class: 'chart-title'}, 'Framework phases over time'), slots.framework),
      card('Time spent in training', stepsEmpty, steps.root));
  heat.mount();
  steps.mount();

  const percent = (title, id) => ({title, unit: 'percent', yRange: [0, 100], group, id, height: 190});
  const charts = {
    cpu: new SeriesChart(slots.cpu, {...percent(null, 'chart-cpu'), empty: 'No CPU metrics yet.'}),
    network: new SeriesChart(slots.network, {unit: 'bytes_per_second', group, id: 'chart-network', height: 190,
      empty: 'No network metrics for this node.'}),
    gpu: new SeriesChart(slots.gpu, {...percent(null, 'chart-gpu'), empty: 'No GPU on this node.'}),
    gpuMemory: new SeriesChart(slots.gpuMemory, {...percent(null, 'chart-gpu-memory'), empty: 'No GPU on this node.'}),
    system: new SeriesChart(slots.system, {...percent(null, 'chart-system'), empty: 'No system metrics yet.'}),
    framework: new SeriesChart(slots.framework, {unit: 'percent', yRange: [0, 100], group, id: 'chart-framework',
      height: 150, empty: 'No framework metrics: turn on profiling to see forward, backward and data loader phases.'}),
  };
  const pickedCores = new Set();
  let system = null;

  function seriesOf(metric, device) {
    return system.series.filter((s) => s.node === nodeSelect.value && s.metric === metric &&
      (device === undefined || s.device === device));
  }
  const line = (s, label, stroke) => ({label, t: s.t, values: s.mean, stroke});

  function renderSystem() {
    if (!system) return;
    const cpuDevices = seriesOf('cpu').map((s) => s.device).filter((d) => d !== 'total').sort(deviceOrder);
    replace(coreBox, cpuDevices.length ? cpuDevices.map((device) => {
      const box = el('input', {type: 'checkbox', checked: pickedCores.has(device), dataset: {core: device}});
      box.addEventListener('change', () => {
        if (box.checked) pickedCores.add(device);
        else pickedCores.delete(device);
        renderSystem();
      });
      return el('label', {class: ['chip', pickedCores.has(device) ? 'on' : '']}, box, device);
    }) : el('span', {class: 'muted'}, 'no per-core data'));
    charts.cpu.update([...seriesOf('cpu', 'total').map((s) => line(s, 'mean', '#1f2937')),
      ...seriesOf('cpu').filter((s) => pickedCores.has(s.device)).sort((a, b) => deviceOrder(a.device, b.device))
          .map((s) => line(s, s.device))]);
    charts.network.update([...seriesOf('network_rx', 'total').map((s) => line(s, 'received')),
      ...seriesOf('network_tx', 'total').map((s) => line(s, 'sent'))]);
    const gpuLines = (metric) => seriesOf(metric).sort((a, b) => deviceOrder(a.device, b.device))
        .map((s) => line(s, s.device === 'total' ? 'mean' : s.device, s.device === 'total' ? '#1f2937' : undefined));
    charts.gpu.update(gpuLines('gpu'));
    charts.gpuMemory.update(gpuLines('gpu_memory'));
    charts.system.update([...seriesOf('cpu', 'total').map((s) => line(s, 'CPU', PALETTE[0])),
      ...seriesOf('gpu', 'total').map((s) => line(s, 'GPU', PALETTE[2])),
      ...seriesOf('io_wait', 'total').map((s) => line(s, 'I/O wait', PALETTE[3])),
      ...seriesOf('cpu_memory', 'total').map((s) => line(s, 'CPU memory', PALETTE[4]))]);
    heat.setRows([...seriesOf('cpu'), ...seriesOf('gpu')].filter((s) => s.device !== 'total')
        .sort((a, b) => deviceOrder(a.device, b.device)).map((s) => ({label: s.device, t: s.t, mean: s.mean})));
  }

  // Whether the job has framework data: a zoomed range of a job without any
  // comes as buckets of zeros, which must not pass for a phase chart.
  let frameworkSeen = false;
  function renderFramework(framework, zoomed) {
    // A job without framework data may come as one bucket at epoch 0: nothing to draw.
    let phases = (framework.phases || []).map((p) => {
      const keep = p.t.map((t) => t > 0);
      return {phase: p.phase, t: p.t.filter((_, i) => keep[i]), busy: p.busy.filter((_, i) => keep[i])};
    }).filter((p) => p.t.length);
    if (!zoomed && phases.length) frameworkSeen = true;
    if (phases.some((p) => p.busy.some((b) => b > 0))) frameworkSeen = true;
    if (!frameworkSeen) phases = [];
    charts.framework.update(phases.map((p, i) => ({label: p.phase, t: p.t,
      values: p.busy.map((b) => (b === null ? null : b * 100)), stroke: PALETTE[(i + 5) % PALETTE.length],
      paths: uPlot.paths.stepped({align: 1})})));
    const last = (framework.steps || []).slice(-50);
    steps.setData([last.map((s) => s.step), last.map((s) => s.seconds)]);
    stepsEmpty.hidden = last.length > 0;
    steps.root.hidden = last.length === 0;
  }

  function takeSystem(reply) {
    // fields=mean: the series share the reply's bucket starts.
    for (const s of reply.series || []) s.t ||= reply.t;
    system = reply;
    const nodes = system.nodes || [];
    const chosen = nodeSelect.value;
    if (nodes.join('|') !== [...nodeSelect.options].map((o) => o.value).join('|')) {
      replace(nodeSelect, nodes.map((n) => el('option', {value: n}, n)));
      nodeSelect.disabled = nodes.length < 2;
      if (!nodes.length) nodeSelect.append(el('option', {value: ''}, 'no node has reported yet'));
      if (nodes.includes(chosen)) nodeSelect.value = chosen;
    }
    renderSystem();
  }

  // The query of both replies: the whole job, or the range the person
  // zoomed to (finer buckets for it), at most POINTS buckets either way.
  const POINTS = 800;
  function rangeQuery() {
    const range = !group.follow && group.range;
    if (!range) return `width=${POINTS}`;
    const start = Math.max(0, range[0]);
    const end = Math.max(start + 0.001, range[1]);
    return `width=${POINTS}&start=${start.toFixed(3)}&end=${end.toFixed(3)}`;
  }

  function showResolution(reply) {
    const seconds = (reply.series || []).length ? reply.bucketSeconds : null;
    resolution.dataset.bucketSeconds = String(seconds ?? '');
    resolution.textContent = seconds ? `${formatDuration(seconds)} per point` : '';
  }

  // Both replies are asked for at once; each is drawn as it comes. A reply
  // of an older load (the person zoomed again meanwhile) is dropped; a
  // failed one leaves the charts as they were, with the error above them.
  let loads = 0;
  async function load() {
    const failures = [];
    const problems = [];
    const query = rangeQuery();
    const current = ++loads;
    const systemDone = api.get(jobPath(context.name, 'system') + `?${query}&fields=mean`).then((reply) => {
      if (current !== loads) return;
      markOnce('dp-system-received');
      showResolution(reply);
      problems.push(...(reply.problems || []));
      takeSystem(reply);
      markOnce('dp-system-rendered');
    }).catch((error) => failures.push(error));
    const frameworkDone = api.get(jobPath(context.name, 'framework') + `?${query}`).then((framework) => {
      if (current !== loads) return;
      markOnce('dp-framework-received');
      problems.push(...(framework.problems || []));
      renderFramework(framework, query.includes('start='));
      markOnce('dp-framework-rendered');
    }).catch((error) => failures.push(error));
    await Promise.all([systemDone, frameworkDone]);
    if (current !== loads) return;
    replace(errors, failures.map(errorBox), problems.map(problemBox));
    markAfterFrame('dp-view-loaded');
  }
  nodeSelect.addEventListener('change', renderSystem);
  const reload = throttle(load, 2000);
  // Zooming (a wheel turn is many events) asks once it settles.
  let zoomTimer = null;
  group.onRangeChange = () => {
    clearTimeout(zoomTimer);
    zoomTimer = setTimeout(load, 250);
  };
  const offs = [context.on('data', reload), context.on('describe', () => renderHosts(hosts, context))];
  // Data events come from the rules engine's reads; once a job's rules have
  // concluded its system metrics still grow: poll while the job runs.
  const poll = setInterval(() => {
    const status = context.summary && context.summary.status;
    if (status === 'InProgress' || status === 'Stopping') reload();
  }, 3000);
  load();
  return () => {
    clearInterval(poll);
    clearTimeout(zoomTimer);
    reload.cancel();
    offs.forEach((off) => off());
    Object.values(charts).forEach((c) => c.destroy());
    heat.destroy();
    steps.destroy();
  };
}
