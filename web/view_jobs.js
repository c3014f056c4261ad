// The Jobs view: every job with its status, rule verdicts and how long ago
// its data last arrived, filtered by status and name, kept live by SSE.

import {api, subscribe} from './api.js';
import {el, replace, badge, errorBox} from './dom.js';
import {formatAgo, formatTime} from './format.js';

const STATUSES = ['InProgress', 'Completed', 'Failed', 'Stopping', 'Stopped'];
const VERDICTS = ['IssuesFound', 'Error', 'InProgress', 'NoIssuesFound', 'Stopping', 'Stopped'];

export function mountJobs(container) {
  const jobs = new Map();  // name -> summary
  const status = el('select', {id: 'filter-status', 'aria-label': 'Status'},
      el('option', {value: ''}, 'Every status'),
      STATUSES.map((s) => el('option', {value: s}, s)));
  const name = el('input', {id: 'filter-name', type: 'search', placeholder: 'Name contains…',
    'aria-label': 'Name contains'});
  const live = el('span', {class: 'live off', id: 'live-state'}, 'connecting…');
  const tbody = el('tbody', {id: 'jobs-rows'});
  const errors = el('div');
  const count = el('span', {class: 'muted'});
  const table = el('table', {class: 'grid jobs'},
      el('thead', {}, el('tr', {},
          ['Job', 'Status', 'Rule verdicts', 'Step', 'Data last arrived', 'Created'].map((h) => el('th', {}, h)))),
      tbody);
  container.append(
      el('div', {class: 'toolbar'}, el('h1', {}, 'Training jobs'), count,
          el('div', {class: 'spacer'}), status, name, live),
      errors,
      el('section', {class: 'card flush'}, table));

  const matches = (job) => (!status.value || job.status === status.value) &&
      (!name.value || job.name.toLowerCase().includes(name.value.toLowerCase()));

  function row(job) {
    const verdicts = VERDICTS.filter((v) => job.verdicts && job.verdicts[v] > 0)
        .map((v) => el('span', {class: ['verdict', 'status-' + v], title: v}, `${job.verdicts[v]} ${v}`));
    return el('tr', {dataset: {job: job.name}},
        el('td', {}, el('a', {href: `#/jobs/${encodeURIComponent(job.name)}/overview`, class: 'job-link'}, job.name)),
        el('td', {}, badge(job.status), job.secondaryStatus && el('span', {class: 'muted small'}, ' ' + job.secondaryStatus)),
        el('td', {class: 'verdicts'}, verdicts.length ? verdicts : el('span', {class: 'muted'}, 'no rules')),
        el('td', {class: 'num'}, job.currentStep ?? '—'),
        el('td', {class: 'ago', dataset: {time: job.lastDataTime ?? ''}}, formatAgo(job.lastDataTime)),
        el('td', {}, formatTime(job.creationTime)));
  }

  function render() {
    const shown = [...jobs.values()].filter(matches)
        .sort((a, b) => (b.creationTime || 0) - (a.creationTime || 0));
    replace(tbody, shown.length ? shown.map(row) :
        el('tr', {}, el('td', {colspan: 6, class: 'empty'},
            jobs.size ? 'No job matches the filter.' : 'No training jobs yet.')));
    count.textContent = `${shown.length} of ${jobs.size}`;
  }

  async function load() {
    const query = new URLSearchParams();
    if (status.value) query.set('status', status.value);
    if (name.value) query.set('name', name.value);
    try {
      const reply = await api.get(`/api/jobs${query.size ? '?' + query : ''}`);
      for (const job of reply.jobs) jobs.set(job.name, job);
      replace(errors);
    } catch (error) {
      replace(errors, errorBox(error));
    }
    render();
  }

  let timer = null;
  const reload = () => {
    clearTimeout(timer);
    timer = setTimeout(load, 200);
  };
  status.addEventListener('change', render);
  name.addEventListener('input', () => {
    render();
    reload();
  });

  const close = subscribe({
    onJob: (summary) => {
      jobs.set(summary.name, summary);
      render();
    },
    onData: (data) => {
      const job = jobs.get(data.name);
      if (!job) return;
      job.lastDataTime = data.lastDataTime;
      if (data.lastStep !== undefined && data.lastStep !== null) job.currentStep = data.lastStep;
      render();
    },
    onState: (open) => {
      live.className = open ? 'live on' : 'live off';
      live.textContent = open ? 'live' : 'reconnecting…';
    },
  });
  // "3 s ago" ages without new events.
  const ticker = setInterval(() => {
    for (const cell of tbody.querySelectorAll('td.ago')) {
      cell.textContent = formatAgo(cell.dataset.time === '' ? null : Number(cell.dataset.time));
    }
  }, 1000);
  load();
  return () => {
    close();
    clearInterval(ticker);
    clearTimeout(timer);
  };
}
