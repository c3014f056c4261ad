// Profiling controls, as Studio's "Configure Debugger monitoring and
// profiling": profiling on/off, the monitoring interval, and detailed,
// data-loader and Python profiling for a range of steps or of time. Sends
// POST /api/jobs/NAME/profiling with the CSRF token; a validation error is
// shown next to the field it names; the job's configuration as recorded
// (and when the agent applied it) is shown above the form.

import {api, jobPath, currentSession, mayChangeProfiling} from './api.js';
import {el, replace} from './dom.js';
import {formatAgo, formatTime} from './format.js';

const INTERVALS = [[100, '100 milliseconds'], [200, '200 milliseconds'], [500, '500 milliseconds'],
  [1000, '1 second'], [5000, '5 seconds'], [60000, '1 minute']];
const KINDS = [
  ['detailedProfiling', 'DetailedProfilingConfig', 'Detailed profiling',
    'Framework operators with the native profiler (raises GPU memory use: profile a couple of steps).'],
  ['dataloaderProfiling', 'DataloaderProfilingConfig', 'Data loader profiling',
    'Every data loader event of the framework.'],
  ['pythonProfiling', 'PythonProfilingConfig', 'Python profiling',
    'Python function calls with cProfile or Pyinstrument.'],
];

/** The ProfilingParameters member's JSON ("{\"StartStep\": 5, }" allowed), or null. */
function parseConfigString(text) {
  if (!text) return null;
  try {
    return JSON.parse(String(text).replace(/,\s*}/g, '}'));
  } catch {
    return null;
  }
}

function describeRange(config) {
  if (!config) return 'off';
  if (config.StartStep !== undefined) {
    const n = Number(config.NumSteps ?? 1);
    return n === 1 ? `step ${config.StartStep}` : `steps ${config.StartStep}–${Number(config.StartStep) + n - 1}`;
  }
  if (config.StartTimeInSecSinceEpoch !== undefined) {
    return `from ${formatTime(Number(config.StartTimeInSecSinceEpoch))} for ${config.DurationInSeconds ?? config.Duration ?? '?'} s`;
  }
  return 'on';
}

export class ProfilingPanel {
  constructor(context) {
    this.context = context;
    this.button = el('button', {type: 'button', id: 'profiling-toggle', class: 'secondary',
      'aria-expanded': 'false', onclick: () => this.toggle()}, 'Profiling');
    this.applied = el('div', {class: 'applied', id: 'profiling-applied'});
    this.form = this.buildForm();
    this.panel = el('section', {class: 'card profiling', id: 'profiling-panel', hidden: true},
        el('h2', {}, 'Debugger monitoring and profiling'), this.applied, this.form);
    this.offs = [context.on('describe', () => this.renderApplied()),
      context.on('job', () => this.renderApplied())];
  }

  destroy() {
    for (const off of this.offs) off();
  }

  toggle(open = this.panel.hidden) {
    this.panel.hidden = !open;
    this.button.setAttribute('aria-expanded', String(open));
    if (open) this.fillFromJob();
  }

  field(name, label, input, hint) {
    input.id ||= `pf-${name.replace('.', '-')}`;
    input.name = name;
    return el('div', {class: 'field', dataset: {field: name}},
        el('label', {for: input.id}, label), input,
        hint && el('span', {class: 'hint'}, hint),
        el('span', {class: 'field-error', dataset: {errorFor: name}, role: 'alert'}));
  }

  buildForm() {
    this.enabled = el('input', {type: 'checkbox', id: 'pf-enabled', role: 'switch'});
    this.interval = el('select', {id: 'pf-interval'},
        INTERVALS.map(([ms, label]) => el('option', {value: String(ms)}, label)));
    this.kinds = {};
    const sections = KINDS.map(([key, , title, hint]) => this.buildKind(key, title, hint));
    this.formError = el('p', {class: 'field-error', id: 'profiling-error', role: 'alert'});
    this.message = el('p', {class: 'ok-message', id: 'profiling-message', role: 'status'});
    this.submit = el('button', {type: 'submit', class: 'primary', id: 'profiling-submit'}, 'Confirm');
    this.roleNote = el('p', {class: 'muted', id: 'profiling-role-note'});
    const form = el('form', {novalidate: true, onsubmit: (event) => {
      event.preventDefault();
      this.send();
    }},
    el('div', {class: 'row'},
        el('div', {class: 'field switch', dataset: {field: 'profilingEnabled'}},
            this.enabled, el('label', {for: 'pf-enabled'}, 'Profiling (framework metrics)'),
            el('span', {class: 'field-error', dataset: {errorFor: 'profilingEnabled'}})),
        this.field('monitoringIntervalMillis', 'Collect monitoring data every', this.interval)),
    el('div', {class: 'kinds'}, sections),
    this.roleNote, this.formError,
    el('div', {class: 'actions'}, this.submit,
        el('button', {type: 'button', class: 'secondary', onclick: () => this.toggle(false)}, 'Close'),
        this.message));
    this.enabled.addEventListener('change', () => this.updateDisabled());
    return form;
  }

  buildKind(key, title, hint) {
    const on = el('input', {type: 'checkbox', id: `pf-${key}-on`});
    const byStep = el('input', {type: 'radio', name: `${key}-by`, value: 'step', checked: true, id: `pf-${key}-bystep`});
    const byTime = el('input', {type: 'radio', name: `${key}-by`, value: 'time', id: `pf-${key}-bytime`});
    const inputs = {
      startStep: el('input', {type: 'text', inputmode: 'numeric', id: `pf-${key}-startStep`}),
      numSteps: el('input', {type: 'text', inputmode: 'numeric', id: `pf-${key}-numSteps`, placeholder: '1'}),
      startTimeSeconds: el('input', {type: 'datetime-local', step: '1', id: `pf-${key}-startTime`}),
      durationSeconds: el('input', {type: 'text', inputmode: 'numeric', id: `pf-${key}-duration`, placeholder: '10'}),
    };
    const stepFields = el('div', {class: 'row'},
        this.field(`${key}.startStep`, 'Start step', inputs.startStep, 'blank: the current step'),
        this.field(`${key}.numSteps`, 'Number of steps', inputs.numSteps));
    const timeFields = el('div', {class: 'row', hidden: true},
        this.field(`${key}.startTimeSeconds`, 'Start time', inputs.startTimeSeconds, 'blank: now'),
        this.field(`${key}.durationSeconds`, 'Duration (seconds)', inputs.durationSeconds));
    const extra = [];
    if (key === 'pythonProfiling') {
      inputs.profilerName = el('select', {id: 'pf-python-profiler'},
          el('option', {value: 'cprofile'}, 'cProfile'), el('option', {value: 'pyinstrument'}, 'Pyinstrument'));
      inputs.cprofileTimer = el('select', {id: 'pf-python-timer'},
          el('option', {value: 'total_time'}, 'total time'), el('option', {value: 'cpu_time'}, 'CPU time'),
          el('option', {value: 'off_cpu_time'}, 'off-CPU time'));
      extra.push(el('div', {class: 'row'},
          this.field(`${key}.profilerName`, 'Profiler', inputs.profilerName),
          this.field(`${key}.cprofileTimer`, 'cProfile timer', inputs.cprofileTimer)));
      inputs.profilerName.addEventListener('change', () => this.updateDisabled());
    }
    const body = el('div', {class: 'kind-body'},
        el('div', {class: 'row radios'},
            el('label', {}, byStep, ' by step'), el('label', {}, byTime, ' by time')),
        stepFields, timeFields, extra);
    const flip = () => {
      stepFields.hidden = byTime.checked;
      timeFields.hidden = !byTime.checked;
    };
    byStep.addEventListener('change', flip);
    byTime.addEventListener('change', flip);
    on.addEventListener('change', () => this.updateDisabled());
    this.kinds[key] = {on, byStep, byTime, inputs, body, flip};
    return el('fieldset', {class: 'kind', dataset: {field: key}},
        el('legend', {}, el('label', {}, on, ' ' + title)),
        el('p', {class: 'hint'}, hint), body,
        el('span', {class: 'field-error', dataset: {errorFor: key}, role: 'alert'}));
  }

  updateDisabled() {
    const allowed = mayChangeProfiling();
    for (const control of this.form.querySelectorAll('input, select')) control.disabled = !allowed;
    this.submit.disabled = !allowed;
    for (const kind of Object.values(this.kinds)) {
      for (const control of kind.body.querySelectorAll('input, select')) {
        control.disabled = !allowed || !this.enabled.checked || !kind.on.checked;
      }
      kind.on.disabled = !allowed || !this.enabled.checked;
    }
    const python = this.kinds.pythonProfiling.inputs;
    if (python.profilerName.value !== 'cprofile') python.cprofileTimer.disabled = true;
    this.roleNote.textContent = allowed ? '' :
      `Signed in as ${currentSession().principal} with role ${currentSession().role}: ` +
      'changing profiling needs role operator or admin.';
  }

  /** Sets the form to the job's recorded ProfilerConfig. */
  fillFromJob() {
    const job = this.context.job;
    const config = (job && job.ProfilerConfig) || {};
    const params = config.ProfilingParameters || {};
    this.enabled.checked = !config.DisableProfiler && job?.ProfilingStatus !== 'Disabled';
    const interval = String(config.ProfilingIntervalInMilliseconds || 500);
    this.interval.value = INTERVALS.some(([ms]) => String(ms) === interval) ? interval : '500';
    for (const [key, member] of KINDS) {
      const kind = this.kinds[key];
      const current = parseConfigString(params[member]);
      kind.on.checked = !!current;
      if (current && current.StartTimeInSecSinceEpoch !== undefined) {
        kind.byTime.checked = true;
        kind.inputs.startTimeSeconds.value = toLocalInput(Number(current.StartTimeInSecSinceEpoch));
        kind.inputs.durationSeconds.value = current.DurationInSeconds ?? current.Duration ?? '';
      } else {
        kind.byStep.checked = true;
        kind.inputs.startStep.value = current?.StartStep ?? '';
        kind.inputs.numSteps.value = current?.NumSteps ?? '';
      }
      if (key === 'pythonProfiling' && current) {
        kind.inputs.profilerName.value = String(current.ProfilerName || 'cprofile').toLowerCase();
        kind.inputs.cprofileTimer.value = current.cProfileTimer || 'total_time';
      }
      kind.inputs.startStep.placeholder = String(this.context.summary?.currentStep ?? 0);
      kind.flip();
    }
    this.clearErrors();
    this.updateDisabled();
  }

  clearErrors() {
    for (const node of this.form.querySelectorAll('.field-error')) node.textContent = '';
    for (const node of this.form.querySelectorAll('.invalid')) node.classList.remove('invalid');
    this.message.textContent = '';
  }

  showError(field, message) {
    const target = field && this.form.querySelector(`[data-error-for="${CSS.escape(field)}"]`);
    if (target) {
      target.textContent = message;
      const input = this.form.querySelector(`[data-field="${CSS.escape(field)}"] input, ` +
          `[data-field="${CSS.escape(field)}"] select`);
      if (input) {
        input.classList.add('invalid');
        input.focus();
      }
    } else {
      this.formError.textContent = message;
    }
  }

  /** The request body, or throws {field, message} for input that is not a number. */
  body() {
    const number = (field, input, fallback) => {
      const text = input.value.trim();
      if (text === '') return fallback;
      const value = Number(text);
      if (!Number.isFinite(value)) throw {field, message: `${text} is not a number`};
      return value;
    };
    const request = {
      profilingEnabled: this.enabled.checked,
      monitoringIntervalMillis: Number(this.interval.value),
    };
    for (const [key] of KINDS) {
      const kind = this.kinds[key];
      if (!this.enabled.checked || !kind.on.checked) {
        request[key] = null;
        continue;
      }
      const config = {};
      if (kind.byTime.checked) {
        const when = kind.inputs.startTimeSeconds.value;
        config.startTimeSeconds = when ? Math.round(new Date(when).getTime() / 1000) : Math.round(Date.now() / 1000);
        config.durationSeconds = number(`${key}.durationSeconds`, kind.inputs.durationSeconds, undefined);
      } else {
        config.startStep = number(`${key}.startStep`, kind.inputs.startStep, this.context.summary?.currentStep ?? 0);
        config.numSteps = number(`${key}.numSteps`, kind.inputs.numSteps, 1);
      }
      if (key === 'pythonProfiling') {
        config.profilerName = kind.inputs.profilerName.value;
        if (config.profilerName === 'cprofile') config.cprofileTimer = kind.inputs.cprofileTimer.value;
      }
      request[key] = config;
    }
    return request;
  }

  async send() {
    this.clearErrors();
    let request;
    try {
      request = this.body();
    } catch (invalid) {
      this.showError(invalid.field, invalid.message);
      return;
    }
    this.submit.disabled = true;
    try {
      const summary = await api.post(jobPath(this.context.name, 'profiling'), request);
      if (summary && summary.name) this.context.summary = {...this.context.summary, ...summary};
      this.message.textContent = 'The profiling configuration was updated.';
      this.context.job = await api.get(jobPath(this.context.name));
      this.renderApplied();
    } catch (error) {
      this.showError(error.field, error.field ? error.cause : error.message);
    } finally {
      this.updateDisabled();
    }
  }

  renderApplied() {
    const job = this.context.job;
    if (!job) return;
    const config = job.ProfilerConfig || {};
    const params = config.ProfilingParameters || {};
    const disabled = config.DisableProfiler || job.ProfilingStatus === 'Disabled';
    this.button.textContent = disabled ? 'Profiling: off' : 'Profiling: on';
    this.button.classList.toggle('on', !disabled);
    const items = [['Profiling', disabled ? 'off' : 'on'],
      ['Monitoring interval', config.ProfilingIntervalInMilliseconds ?
        `${config.ProfilingIntervalInMilliseconds} ms` : '—']];
    for (const [, member, title] of KINDS) {
      const parsed = parseConfigString(params[member]);
      items.push([title, parsed ? describeRange(parsed) : (params[member] ? String(params[member]) : 'off')]);
    }
    const appliedTime = this.context.summary?.profilerConfigAppliedTime;
    items.push(['Applied by the agent', appliedTime ?
      `${formatTime(appliedTime)} (${formatAgo(appliedTime)})` : 'not reported yet']);
    replace(this.applied, el('h3', {}, 'Current configuration (the job\'s ProfilerConfig)'),
        el('dl', {class: 'facts'}, items.map(([k, v]) => [el('dt', {}, k), el('dd', {dataset: {key: k}}, v)])));
  }
}

function toLocalInput(seconds) {
  const date = new Date(seconds * 1000);
  const pad = (n) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T` +
    `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}
