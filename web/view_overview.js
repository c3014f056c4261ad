// The Overview tab: training job summary (phases as a timeline bar and a
// pie), resource utilization per node, the top framework operations, and
// each rule's insight. Reloaded when the job's record or data change.

import {api, jobPath} from './api.js';
import {el, replace, card, badge, errorBox, problemBox} from './dom.js';
import {formatTime, formatDuration, formatShare, formatValue, formatNumber} from './format.js';
import {throttle} from './throttle.js';
import {markOnce, markAfterFrame} from './marks.js';

const PHASE_COLORS = {initialization: '#8a9bb0', training_loop: '#2f6fde', finalization: '#e0a31b'};
const PHASE_LABELS = {initialization: 'Initialization', training_loop: 'Training loop', finalization: 'Finalization'};
const METRIC_LABELS = {cpu: 'CPU', gpu: 'GPU', cpu_memory: 'CPU memory', gpu_memory: 'GPU memory',
  io_wait: 'I/O wait', network: 'Network'};

export function mountOverview(container, context) {
  const summaryBox = el('div', {id: 'overview-summary'}, el('p', {class: 'loading'}, 'Loading…'));
  const utilizationBox = el('div', {id: 'overview-utilization'});
  const operationsBox = el('div', {id: 'overview-operations'});
  const insightsBox = el('div', {id: 'overview-insights'});
  const errors = el('div');
  container.append(errors,
      card('Training job summary', summaryBox),
      el('div', {class: 'columns'},
          card('Resource utilization', utilizationBox),
          card('Resource intensive operations', operationsBox)),
      card('Insights', insightsBox));
  const open = new Set();  // expanded insights survive a reload

  async function load() {
    try {
      const overview = await api.get(jobPath(context.name, 'overview'));
      markOnce('dp-overview-received');
      replace(errors, (overview.problems || []).map(problemBox));
      // Before any step was profiled the job's own times stand in.
      const summary = {...(overview.summary || {})};
      summary.start ??= context.summary?.trainingStartTime ?? context.summary?.creationTime ?? null;
      summary.end ??= context.summary?.trainingEndTime ?? null;
      if (summary.durationSeconds == null && summary.start) {
        summary.durationSeconds = (summary.end ?? Date.now() / 1000) - summary.start;
      }
      renderSummary(summaryBox, summary);
      renderUtilization(utilizationBox, overview.utilization || []);
      renderOperations(operationsBox, overview.operations || []);
      renderInsights(insightsBox, overview.insights || [], open, context.name);
      markOnce('dp-overview-rendered');
      markOnce('dp-first-chart');
    } catch (error) {
      replace(errors, errorBox(error));
      if (summaryBox.querySelector('.loading')) replace(summaryBox, el('p', {class: 'muted'}, 'No summary: the overview did not load.'));
    }
    markAfterFrame('dp-view-loaded');
  }
  const reload = throttle(load, 1500);
  const offs = [context.on('job', reload), context.on('data', reload)];
  load();
  return () => {
    reload.cancel();
    offs.forEach((off) => off());
  };
}

function renderSummary(box, summary) {
  const phases = summary.phases || [];
  const bar = el('div', {class: 'phase-bar', id: 'phase-bar', role: 'img',
    'aria-label': phases.map((p) => `${PHASE_LABELS[p.name] || p.name} ${formatShare(p.share)}`).join(', ')});
  for (const phase of phases) {
    const segment = el('div', {class: 'phase', title: `${PHASE_LABELS[phase.name] || phase.name}: ` +
      `${formatDuration(phase.seconds)} (${formatShare(phase.share)})`});
    segment.style.flexGrow = String(Math.max(phase.share || 0, 0.002));
    segment.style.background = PHASE_COLORS[phase.name] || '#5b6b7c';
    bar.append(segment);
  }
  const axis = el('div', {class: 'phase-axis'},
      el('span', {}, formatTime(summary.start)), el('span', {}, summary.end ? formatTime(summary.end) : 'running'));
  const pie = el('canvas', {class: 'pie', width: 160, height: 160, id: 'phase-pie'});
  drawPie(pie, phases);
  const legend = el('ul', {class: 'legend'}, phases.map((p) => el('li', {},
      swatch(PHASE_COLORS[p.name]), el('span', {class: 'legend-name'}, PHASE_LABELS[p.name] || p.name),
      el('span', {class: 'num'}, formatDuration(p.seconds)), el('span', {class: 'num muted'}, formatShare(p.share)))));
  const loop = phases.find((p) => p.name === 'training_loop');
  const facts = [['Start time', formatTime(summary.start)],
    ['End time', summary.end ? formatTime(summary.end) : 'still running'],
    ['Job duration', formatDuration(summary.durationSeconds)],
    ['Training loop start', formatTime(loop?.start)], ['Training loop end', formatTime(loop?.end)],
    ['Training loop duration', formatDuration(loop?.seconds)]];
  replace(box, el('div', {class: 'summary-grid'},
      el('div', {},
          el('h3', {}, 'Training progress over time'), phases.length ? [bar, axis] :
            el('p', {class: 'muted'}, 'No phases yet: the training has not reported its steps.'),
          el('dl', {class: 'facts'}, facts.map(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]))),
      phases.length ? el('div', {class: 'pie-box'}, pie, legend) : el('div')));
}

function swatch(color) {
  const node = el('span', {class: 'swatch'});
  node.style.background = color || '#5b6b7c';
  return node;
}

function drawPie(canvas, phases) {
  const ctx = canvas.getContext('2d');
  const ratio = window.devicePixelRatio || 1;
  const size = 160;
  canvas.width = size * ratio;
  canvas.height = size * ratio;
  canvas.style.width = `${size}px`;
  canvas.style.height = `${size}px`;
  ctx.scale(ratio, ratio);
  let angle = -Math.PI / 2;
  const total = phases.reduce((sum, p) => sum + (p.share || 0), 0);
  if (!total) {
    ctx.fillStyle = '#eef0f3';
    ctx.beginPath();
    ctx.arc(80, 80, 70, 0, 2 * Math.PI);
    ctx.fill();
  }
  for (const phase of phases) {
    const sweep = (phase.share / total) * 2 * Math.PI;
    ctx.fillStyle = PHASE_COLORS[phase.name] || '#5b6b7c';
    ctx.beginPath();
    ctx.moveTo(80, 80);
    ctx.arc(80, 80, 70, angle, angle + sweep);
    ctx.closePath();
    ctx.fill();
    angle += sweep;
  }
  ctx.fillStyle = '#fff';
  ctx.beginPath();
  ctx.arc(80, 80, 38, 0, 2 * Math.PI);
  ctx.fill();
}

function renderUtilization(box, rows) {
  if (!rows.length) {
    replace(box, el('p', {class: 'muted'}, 'No system metrics yet.'));
    return;
  }
  const nodes = [...new Set(rows.map((r) => r.node))];
  replace(box, el('table', {class: 'grid compact', id: 'utilization-table'},
      el('thead', {}, el('tr', {}, ['Node', 'Metric', 'min', 'max', 'p99', 'p90', 'p50']
          .map((h, i) => el('th', {class: i > 1 ? 'num' : ''}, h)))),
      el('tbody', {}, nodes.flatMap((node) => rows.filter((r) => r.node === node).map((r, i) =>
        el('tr', {},
            el('td', {}, i === 0 ? node : ''),
            el('td', {}, METRIC_LABELS[r.metric] || r.metric),
            ['min', 'max', 'p99', 'p90', 'p50'].map((k) =>
              el('td', {class: ['num', r.metric !== 'gpu' && r.unit === 'percent' && r[k] >= 90 ? 'hot' : '']}, formatValue(r[k], r.unit)))))))));
}

function renderOperations(box, operations) {
  if (!operations.length) {
    replace(box, el('p', {class: 'muted'}, 'No framework profiling data: turn on detailed profiling to see operations.'));
    return;
  }
  const top = Math.max(...operations.map((o) => o.share || 0), 1e-9);
  replace(box, el('table', {class: 'grid compact', id: 'operations-table'},
      el('thead', {}, el('tr', {}, ['Operation', 'Phase', 'Time', 'Calls', 'Share']
          .map((h, i) => el('th', {class: i > 1 ? 'num' : ''}, h)))),
      el('tbody', {}, operations.map((op) => {
        const fill = el('span', {class: 'share-fill'});
        fill.style.width = `${Math.round(((op.share || 0) / top) * 100)}%`;
        return el('tr', {},
            el('td', {class: 'op-name', title: op.name}, op.name),
            el('td', {}, op.phase || '—'),
            el('td', {class: 'num'}, formatDuration(op.totalSeconds)),
            el('td', {class: 'num'}, formatNumber(op.count)),
            el('td', {class: 'num share'}, el('span', {class: 'share-bar'}, fill), formatShare(op.share)));
      }))));
}

const STATUS_ORDER = {IssuesFound: 0, Error: 1, InProgress: 2, Stopping: 3, NoIssuesFound: 4, Stopped: 5};

// The page (html) or summary (json) of a rule's report, in a tab of its own.
function reportLink(jobName, rule, format) {
  return `${jobPath(jobName, 'report')}?rule=${encodeURIComponent(rule)}&format=${format}`;
}

function renderInsights(box, insights, open, jobName) {
  const reportPath = (rule, format) => reportLink(jobName, rule, format);
  if (!insights.length) {
    replace(box, el('p', {class: 'muted'}, 'This job has no rules.'));
    return;
  }
  const sorted = [...insights].sort((a, b) => (STATUS_ORDER[a.status] ?? 9) - (STATUS_ORDER[b.status] ?? 9) ||
    a.rule.localeCompare(b.rule));
  replace(box, el('div', {class: 'insights'}, sorted.map((insight) => {
    const found = insight.found;
    const details = el('details', {class: ['insight', 'status-border-' + insight.status],
      dataset: {rule: insight.rule, status: insight.status}, open: open.has(insight.rule) || insight.status === 'IssuesFound'},
    el('summary', {}, badge(insight.status), el('span', {class: 'rule-name'}, insight.rule),
        el('span', {class: 'muted small'}, insight.kind === 'profiler' ? 'profiler rule' : 'debugging rule'),
        found && found.message ? el('span', {class: 'found-short'}, found.message) : null),
    el('div', {class: 'insight-body'},
        el('h4', {}, 'What it checks'), el('p', {}, insight.checks || '—'),
        el('h4', {}, 'Parameters'),
        el('dl', {class: 'facts inline'}, Object.entries(insight.parameters || {}).map(([k, v]) =>
          [el('dt', {}, k), el('dd', {}, String(v))])),
        el('h4', {}, 'What it found'),
        found ? el('dl', {class: 'facts found'},
            [['Step', found.step], ['Tensor', found.tensor], ['Value', found.value], ['Message', found.message]]
                .filter(([, v]) => v !== null && v !== undefined)
                .map(([k, v]) => [el('dt', {}, k), el('dd', {}, typeof v === 'number' ? formatNumber(v) : String(v))])) :
          el('p', {class: 'muted'}, insight.status === 'InProgress' ? 'Nothing yet; still evaluating.' : 'No issue.'),
        insight.suggestion && [el('h4', {}, 'Suggestion'), el('p', {}, insight.suggestion)],
        insight.report && [el('h4', {}, 'Report'), el('p', {class: 'report-links'},
            el('a', {href: reportPath(insight.rule, 'html'), target: '_blank', rel: 'noopener',
              class: 'report-link'}, 'Open the report'), ' · ',
            el('a', {href: reportPath(insight.rule, 'json'), target: '_blank', rel: 'noopener'}, 'JSON')),
        ]));
    details.addEventListener('toggle', () => (details.open ? open.add(insight.rule) : open.delete(insight.rule)));
    return details;
  })));
}
