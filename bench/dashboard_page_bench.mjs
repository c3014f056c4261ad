// Time to first chart of the dashboard's Overview and Nodes views in a real
// Chromium (playwright-core), over the real debugplane-server reading a
// large job's profiler output (dashboard_bench's 1-day, 96-core, 8-GPU job),
// with the bytes each request sent over the wire.
//
//   node bench/dashboard_page_bench.mjs --build build/test --data DIR
//       [--loads 10] [--views overview,nodes] [--screenshots DIR] [--keep]
//       [--cpu-profile DIR]   (Chromium's CPU profile of one more load of each
//                              view: DIR/VIEW.cpuprofile, and its top functions)
//
// DIR holds profiler/system/incremental/... (dashboard_bench --dir DIR
// makes it). The server gets a data directory of its own (under TMPDIR) in
// which the job's profiler directory is a hard-linked copy of DIR/profiler
// (no bytes copied, nothing written into DIR: TMPDIR must be on DIR's file
// system). The job is created through the CLI (InProgress, profiling on, no
// rules); the bench waits until the server has read everything (the system
// reply's end reaches the last sample's time in the newest file), then loads
// each view N times, each in a fresh browser context (nothing cached: a
// first visit).
//
// Definitions (web/marks.js sets the marks; times are from the navigation's
// start, performance.timeOrigin):
//   first chart  the mark dp-first-chart: the first chart's canvas drew data
//                (Nodes: a uPlot chart's draw hook or the heatmap's draw with
//                rows; Overview, which has no time chart: its summary and
//                utilization table rendered from the overview reply)
//   loaded       the mark dp-view-loaded: every reply of the view rendered
//                and a frame drawn after it
//   bytes        per request, Chromium's encoded body + header sizes
//                (request.sizes()): what crossed the wire, gzip included;
//                "body" is the decoded body. The event stream (/api/events,
//                never finishes) is left out.
import {spawnSync} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {fileURLToPath} from 'node:url';

const SOURCE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function parseArgs(argv) {
  const args = {build: 'build/test', data: null, loads: 10, views: 'overview,nodes', screenshots: null,
    keep: false, 'cpu-profile': null};
  for (let i = 0; i < argv.length; i++) {
    const name = argv[i].replace(/^--/, '');
    if (name === 'keep') {
      args.keep = true;
    } else if (name in args) {
      args[name] = argv[++i];
    } else {
      throw new Error(`unknown option ${argv[i]}; known: --build --data --loads --views --screenshots --keep --cpu-profile`);
    }
  }
  if (!args.data) throw new Error('--data DIR is required (DIR/profiler from dashboard_bench --dir DIR)');
  args.loads = Number(args.loads);
  args.views = args.views.split(',');
  return args;
}

const args = parseArgs(process.argv.slice(2));
const build = path.resolve(args.build);
process.env.DP_SOURCE_DIR ||= SOURCE_DIR;
process.env.DP_SERVER_BINARY ||= path.join(build, 'debugplane-server');
process.env.DP_CLI_BINARY ||= path.join(build, 'debugplane');
const {startServer, createJob, jobRequest, openBrowser, waitFor} = await import('../tests/web/harness.mjs');

const JOB = 'dashboard-page-bench';

/** The time of the last sample in the newest system-metrics file under `profiler`. */
function lastSampleTime(profiler) {
  const hours = path.join(profiler, 'system', 'incremental');
  const hour = fs.readdirSync(hours).sort().at(-1);
  const file = path.join(hours, hour, fs.readdirSync(path.join(hours, hour)).sort().at(-1));
  const size = fs.statSync(file).size;
  const fd = fs.openSync(file, 'r');
  const tail = Buffer.alloc(Math.min(size, 4096));
  fs.readSync(fd, tail, 0, tail.length, size - tail.length);
  fs.closeSync(fd);
  const times = [...tail.toString('utf8').matchAll(/"Timestamp": *([0-9.]+)/g)].map((m) => Number(m[1]));
  if (!times.length) throw new Error(`no "Timestamp" at the end of ${file}`);
  return Math.max(...times);
}

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

const fmt = (ms) => (ms === undefined ? '-' : ms.toFixed(0));

/** The functions of a CPU profile (Chrome's .cpuprofile) with the most self time, as lines. */
function topFunctions(profile, count = 12) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  const deltas = profile.timeDeltas || [];
  profile.samples.forEach((id, i) => {
    const frame = byId.get(id).callFrame;
    const where = frame.url ? `${frame.url.replace(/^.*\/dashboard\//, '')}:${frame.lineNumber + 1}` : '';
    const key = `${frame.functionName || '(anonymous)'} ${where}`.trim();
    self.set(key, (self.get(key) || 0) + (deltas[i + 1] ?? 0) / 1000);
  });
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  return [`total ${total.toFixed(0)} ms sampled`, ...[...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, count)
      .map(([name, ms]) => `${ms.toFixed(1).padStart(8)} ms  ${name}`)];
}

/** One load of `url` in a fresh context: the marks and the requests. */
async function loadOnce(browser, url, screenshotFile, profileFile) {
  const page = await browser.newPage();
  const requests = [];
  page.on('requestfinished', (request) => requests.push(request));
  let cdp = null;
  if (profileFile) {
    cdp = await page.context().newCDPSession(page);
    await cdp.send('Profiler.enable');
    await cdp.send('Profiler.setSamplingInterval', {interval: 200});
    await cdp.send('Profiler.start');
  }
  await page.goto(url);
  await page.waitForFunction(() => performance.getEntriesByName('dp-view-loaded').length > 0, null,
      {timeout: 120000});
  let profileTop = null;
  if (cdp) {
    const {profile} = await cdp.send('Profiler.stop');
    fs.writeFileSync(profileFile, JSON.stringify(profile));
    profileTop = topFunctions(profile);
  }
  const marks = await page.evaluate(() => Object.fromEntries(performance.getEntriesByType('mark')
      .map((m) => [m.name, m.startTime])));
  const rows = [];
  for (const request of requests) {
    const sizes = await request.sizes();
    const response = await request.response();
    const body = response ? (await response.body().catch(() => Buffer.alloc(0))).length : 0;
    const timing = request.timing();
    rows.push({path: new URL(request.url()).pathname + new URL(request.url()).search,
      wire: sizes.responseBodySize + sizes.responseHeadersSize, body,
      encoding: response ? (await response.headerValue('content-encoding')) || '' : '',
      ms: timing.responseEnd > 0 ? timing.responseEnd : undefined});
  }
  if (screenshotFile) await page.screenshot({path: screenshotFile, fullPage: true});
  await page.context().close();
  return {marks, requests: rows, profileTop};
}

async function main() {
  const profilerSource = path.join(path.resolve(args.data), 'profiler');
  if (!fs.existsSync(path.join(profilerSource, 'system'))) {
    throw new Error(`${profilerSource}/system does not exist: make it with dashboard_bench --dir ${args.data}`);
  }
  const expectedEnd = lastSampleTime(profilerSource);
  const server = await startServer();
  const profiler = path.join(server.dataDir, JOB, 'profiler');
  fs.mkdirSync(path.dirname(profiler), {recursive: true});
  const link = spawnSync('cp', ['-al', profilerSource, profiler], {encoding: 'utf8'});
  if (link.status !== 0) {
    await server.stop();
    throw new Error(`cp -al ${profilerSource} ${profiler} failed (TMPDIR must be on the data's file system): ${link.stderr}`);
  }
  const request = jobRequest(JOB, {profiler, rules: []});
  delete request.DebugHookConfig;
  delete request.DebugRuleConfigurations;
  const started = Date.now();
  createJob(server, request);
  let browser;
  try {
    const systemPath = `${server.http}/api/jobs/${JOB}/system?width=1`;
    await waitFor(async () => {
      const reply = await (await fetch(systemPath)).json();
      return reply.end >= expectedEnd - 0.5;
    }, 'the server to read the whole job', 3600 * 1000, 2000);
    const load = os.loadavg().map((l) => l.toFixed(2)).join(' ');
    console.log(`job: ${profilerSource} read by the server in ${((Date.now() - started) / 1000).toFixed(1)} s ` +
      `(last sample ${new Date(expectedEnd * 1000).toISOString()}); load average ${load}`);
    browser = await openBrowser();
    console.log(`\n${'view'.padEnd(10)} ${'loads'.padStart(5)} ${'first p50'.padStart(10)} ${'first max'.padStart(10)} ` +
      `${'loaded p50'.padStart(11)} ${'loaded max'.padStart(11)} ${'requests'.padStart(9)} ${'wire KB'.padStart(9)} ${'body KB'.padStart(9)}`);
    const details = [];
    for (const view of args.views) {
      const url = `${server.http}/dashboard/#/jobs/${JOB}/${view}`;
      const loads = [];
      for (let i = 0; i < args.loads; i++) {
        const shot = args.screenshots && i === args.loads - 1 ? path.join(args.screenshots, `page-bench-${view}.png`) : null;
        if (shot) fs.mkdirSync(args.screenshots, {recursive: true});
        loads.push(await loadOnce(browser, url, shot, null));
      }
      // One more load, profiled (not among the timed ones: the profiler slows the page).
      let profileTop = null;
      if (args['cpu-profile']) {
        fs.mkdirSync(args['cpu-profile'], {recursive: true});
        ({profileTop} = await loadOnce(browser, url, null, path.join(args['cpu-profile'], `${view}.cpuprofile`)));
      }
      const first = loads.map((l) => l.marks['dp-first-chart']);
      const loaded = loads.map((l) => l.marks['dp-view-loaded']);
      const last = loads.at(-1);
      const apiRequests = last.requests.filter((r) => !r.path.startsWith('/api/events'));
      const wire = apiRequests.reduce((sum, r) => sum + r.wire, 0);
      const body = apiRequests.reduce((sum, r) => sum + r.body, 0);
      console.log(`${view.padEnd(10)} ${String(loads.length).padStart(5)} ${fmt(percentile(first, 50)).padStart(10)} ` +
        `${fmt(Math.max(...first)).padStart(10)} ${fmt(percentile(loaded, 50)).padStart(11)} ` +
        `${fmt(Math.max(...loaded)).padStart(11)} ${String(apiRequests.length).padStart(9)} ` +
        `${(wire / 1024).toFixed(1).padStart(9)} ${(body / 1024).toFixed(1).padStart(9)}`);
      details.push({view, last, loads, profileTop});
    }
    for (const {view, last, loads, profileTop} of details) {
      console.log(`\n${view}: requests of the last load (wire bytes, decoded body bytes, ms from request to its end)`);
      for (const r of last.requests) {
        console.log(`  ${r.path.padEnd(60)} ${String(r.wire).padStart(9)} ${String(r.body).padStart(9)} ` +
          `${r.encoding.padStart(5)} ${fmt(r.ms).padStart(6)}`);
      }
      const names = Object.keys(last.marks).sort((a, b) => last.marks[a] - last.marks[b]);
      if (profileTop) console.log(`  CPU profile of one more load (self time):\n    ${profileTop.join('\n    ')}`);
      console.log(`  marks (p50 over ${loads.length} loads, ms from navigation start): ` +
        names.map((n) => `${n} ${fmt(percentile(loads.map((l) => l.marks[n]).filter((v) => v !== undefined), 50))}`).join(', '));
    }
    // The server's part of the Nodes view's data, alone: the same query
    // from Node (no browser), plain and gzipped, one at a time.
    console.log('\nserver: the Nodes query alone, 20 sequential requests each (ms from request to the last byte)');
    for (const [label, query, encoding] of [
      ['system?width=800 (before: every array)', 'width=800', 'identity'],
      ['system?width=800&fields=mean', 'width=800&fields=mean', 'identity'],
      ['system?width=800&fields=mean, gzip', 'width=800&fields=mean', 'gzip']]) {
      const times = [];
      let bytes = 0;
      for (let i = 0; i < 20; i++) {
        const t0 = performance.now();
        const response = await fetch(`${server.http}/api/jobs/${JOB}/system?${query}`,
            {headers: {'Accept-Encoding': encoding}});
        const body = Buffer.from(await response.arrayBuffer());
        times.push(performance.now() - t0);
        bytes = Number(response.headers.get('content-length') || body.length);
      }
      console.log(`  ${label.padEnd(44)} p50 ${fmt(percentile(times, 50)).padStart(5)}  max ${fmt(Math.max(...times)).padStart(5)}  ` +
        `${(bytes / 1024).toFixed(1)} KB sent`);
    }
    console.log(`\nload average at the end: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  } finally {
    if (browser) await browser.close();
    await server.stop();
    if (!args.keep) fs.rmSync(server.dataDir, {recursive: true, force: true});
  }
}

await main();
