// What the dashboard's browser tests share: the real debugplane-server (and
// agent, CLI, fake training) as child processes on free loopback ports, each
// test in a directory of its own, and Debian's Chromium driven by
// playwright-core with console errors, page errors and CSP violations
// collected, and screenshots saved under DP_WEB_ARTIFACTS.
//
// Environment (set by CMake's add_test): DP_SERVER_BINARY, DP_CLI_BINARY,
// DP_AGENT_BINARY, DP_FAKE_TRAINING_BINARY, DP_SOURCE_DIR, DP_WEB_ARTIFACTS,
// DP_CHROMIUM (default /usr/bin/chromium).

import {spawn, spawnSync} from 'node:child_process';
import {createRequire} from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests through ctest (ctest -L web)`);
  return value;
}

export const SOURCE_DIR = required('DP_SOURCE_DIR');
export const DATA_DIR = path.join(SOURCE_DIR, 'tests', 'data');
export const ARTIFACTS = process.env.DP_WEB_ARTIFACTS || path.join(os.tmpdir(), 'debugplane-web-artifacts');

/** playwright-core from web/node_modules (installed by scripts/install-deps.sh: npm ci in web/). */
export function playwright() {
  const require = createRequire(path.join(SOURCE_DIR, 'web', 'package.json'));
  try {
    return require('playwright-core');
  } catch (error) {
    throw new Error(`playwright-core is not installed in ${path.join(SOURCE_DIR, 'web')}: ` +
      `run 'npm ci' there or scripts/install-deps.sh (${error.message})`);
  }
}

/** A fresh directory for one test, removed by cleanup(). */
export function tempDir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), `dp-web-${prefix}-`));
}

/** Polls `fn` (sync or async) until it returns a truthy value; throws `what` after `ms`. */
export async function waitFor(fn, what, ms = 20000, every = 100) {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await fn();
      if (last) return last;
    } catch (error) {
      last = error;
    }
    await new Promise((resolve) => setTimeout(resolve, every));
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
}

/**
 * Starts debugplane-server on free loopback ports (gRPC and HTTP) with its
 * own data directory. Resolves to {grpc, http, dataDir, log(), stop()}.
 */
export async function startServer({dataDir, args = []} = {}) {
  dataDir ||= tempDir('server');
  const argv = ['--listen', '127.0.0.1:0', '--http-listen', '127.0.0.1:0', '--data-dir', dataDir,
    '--log-level', 'warn', ...args];
  const child = spawn(required('DP_SERVER_BINARY'), argv, {stdio: ['ignore', 'pipe', 'pipe']});
  let output = '';
  let stderr = '';
  child.stderr.on('data', (chunk) => { stderr += chunk; });
  const ports = await new Promise((resolve, reject) => {
    const found = {};
    const timer = setTimeout(() => reject(new Error(`debugplane-server did not start in 30 s: ${stderr}`)), 30000);
    child.stdout.on('data', (chunk) => {
      output += chunk;
      const http = /debugplane-server http listening on port (\d+)/.exec(output);
      const grpc = /debugplane-server listening on port (\d+)/.exec(output);
      if (http) found.http = Number(http[1]);
      if (grpc) found.grpc = Number(grpc[1]);
      if (found.http && found.grpc) {
        clearTimeout(timer);
        resolve(found);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`debugplane-server exited with ${code} before listening: ${stderr}`));
    });
  });
  return {
    grpc: `127.0.0.1:${ports.grpc}`,
    http: `http://127.0.0.1:${ports.http}`,
    dataDir,
    log: () => stderr,
    stop: () => new Promise((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', resolve);
      child.kill('SIGKILL');
    }),
  };
}

/** Runs the CLI `debugplane --server S [--token T] -o json ARGS`; returns its parsed stdout. */
export function cli(server, args, {token, input} = {}) {
  const argv = ['--server', server.grpc, '-o', 'json', ...(token ? ['--token', token] : []), ...args];
  const result = spawnSync(required('DP_CLI_BINARY'), argv, {input, encoding: 'utf8', timeout: 30000});
  if (result.status !== 0) {
    throw new Error(`debugplane ${args.join(' ')} exited ${result.status}: ${result.stderr}${result.stdout}`);
  }
  return result.stdout.trim() ? JSON.parse(result.stdout) : null;
}

/** Creates a job from a SageMaker CreateTrainingJob request (an object) through the CLI. */
export function createJob(server, request, options = {}) {
  return cli(server, ['create', '--file', '-'], {...options, input: JSON.stringify(request)});
}

/** The job as the CLI describes it (DescribeTrainingJob, SageMaker member names). */
export function describeJob(server, name, options = {}) {
  return cli(server, ['describe', name], options);
}

/**
 * A CreateTrainingJob request whose tensor and profiler output are local
 * directories (under the server's data directory, its data root).
 */
export function jobRequest(name, {tensors, profiler, rules = ['ExplodingTensor'], profilerRules = [],
  intervalMillis = 500} = {}) {
  return {
    TrainingJobName: name,
    RoleArn: 'arn:aws:iam::111122223333:role/service-role/Test',
    AlgorithmSpecification: {TrainingImage: 'local/training:latest', TrainingInputMode: 'File'},
    OutputDataConfig: {S3OutputPath: 's3://bucket/out'},
    ResourceConfig: {InstanceType: 'ml.p3.2xlarge', InstanceCount: 1, VolumeSizeInGB: 30},
    StoppingCondition: {MaxRuntimeInSeconds: 86400},
    DebugHookConfig: {S3OutputPath: tensors, CollectionConfigurations: [{CollectionName: 'losses'}]},
    DebugRuleConfigurations: rules.map((rule) => ({RuleConfigurationName: rule,
      RuleEvaluatorImage: 'builtin', RuleParameters: {rule_to_invoke: rule}})),
    ProfilerConfig: {S3OutputPath: profiler, ProfilingIntervalInMilliseconds: intervalMillis},
    ...(profilerRules.length ? {ProfilerRuleConfigurations: profilerRules.map((rule) => ({
      RuleConfigurationName: rule, RuleEvaluatorImage: 'builtin', RuleParameters: {rule_to_invoke: rule}}))} : {}),
  };
}

/**
 * `debugplane-agent run` for `job` around dp_fake_training `trainingArgs`
 * (or around `program` with them: a real training).
 * Returns {configDir, log(), stop(), exited}.
 */
export function startAgent(server, job, workDir, trainingArgs, {token, program} = {}) {
  const configDir = path.join(workDir, job, 'config');
  const logPath = path.join(workDir, `${job}-agent.log`);
  const log = fs.openSync(logPath, 'w');
  const argv = ['run', '--server', server.grpc, '--job', job, '--config-dir', configDir,
    '--allow-write', workDir, '--stop-grace', '1', ...(token ? ['--token', token] : []),
    '--', program || required('DP_FAKE_TRAINING_BINARY'), ...trainingArgs];
  const child = spawn(required('DP_AGENT_BINARY'), argv, {stdio: ['ignore', log, log], cwd: workDir});
  const exited = new Promise((resolve) => child.on('exit', resolve));
  return {
    configDir,
    log: () => fs.readFileSync(logPath, 'utf8'),
    exited,
    // SIGTERM, which the agent should pass to the training; the training
    // (in a process group of its own) is killed too in case the agent died
    // without passing it on (it does when SIGTERM reaches a thread that does
    // not block it), so that no training outlives its test.
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const training = descendants(child.pid);
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10000);
      await exited;
      clearTimeout(timer);
      for (const pid of training) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Already gone.
        }
      }
    },
  };
}

/** The pids of every process below `pid` (from /proc/PID/task/TID/children). */
function descendants(pid) {
  const found = [];
  const visit = (parent) => {
    let tasks = [];
    try {
      tasks = fs.readdirSync(`/proc/${parent}/task`);
    } catch {
      return;
    }
    for (const task of tasks) {
      let children = '';
      try {
        children = fs.readFileSync(`/proc/${parent}/task/${task}/children`, 'utf8');
      } catch {
        continue;
      }
      for (const child of children.trim().split(/\s+/).filter(Boolean).map(Number)) {
        found.push(child);
        visit(child);
      }
    }
  };
  visit(pid);
  return found;
}

/** Copies a directory tree. */
export function copyTree(from, to) {
  fs.cpSync(from, to, {recursive: true});
}

/**
 * Chromium (Debian's) with a 1440x900 page. Collects console errors, page
 * errors and CSP violations in `problems`; assertNoProblems() fails the test
 * when there is any.
 */
export async function openBrowser() {
  const {chromium} = playwright();
  const executablePath = process.env.DP_CHROMIUM || '/usr/bin/chromium';
  if (!fs.existsSync(executablePath)) {
    throw new Error(`Chromium is not at ${executablePath}: apt-get install chromium (scripts/install-deps.sh)`);
  }
  const args = process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : [];
  const browser = await chromium.launch({executablePath, headless: true, args});
  const problems = [];
  const watch = (page) => {
    page.on('console', (message) => {
      if (message.type() === 'error' || message.type() === 'warning' && /Content Security Policy/i.test(message.text())) {
        problems.push(`console ${message.type()}: ${message.text()}`);
      }
    });
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    return page;
  };
  return {
    browser,
    problems,
    async newPage() {
      const context = await browser.newContext({viewport: {width: 1440, height: 900}});
      const page = watch(await context.newPage());
      // A CSP violation also fires securitypolicyviolation in the page.
      await page.addInitScript(() => {
        document.addEventListener('securitypolicyviolation', (event) => {
          console.error(`CSP violation: ${event.violatedDirective} ${event.blockedURI}`);
        });
      });
      return page;
    },
    /** Fails when any page logged an error or violated the CSP. `allow` regexps skip expected ones. */
    assertNoProblems(allow = []) {
      const left = problems.filter((p) => !allow.some((re) => re.test(p)));
      assert.deepEqual(left, [], `the page reported problems:\n${left.join('\n')}`);
    },
    close: () => browser.close(),
  };
}

/**
 * Saves a full-page screenshot as ARTIFACTS/NAME.png, then fails if the page
 * shows its failure banner (an uncaught error in the page's own code).
 */
export async function screenshot(page, name) {
  fs.mkdirSync(ARTIFACTS, {recursive: true});
  const file = path.join(ARTIFACTS, `${name}.png`);
  await page.screenshot({path: file, fullPage: true});
  const banner = page.locator('#banner');
  if (await banner.isVisible()) {
    assert.fail(`the page shows its failure banner on ${name}: ${await banner.textContent()}`);
  }
  return file;
}
