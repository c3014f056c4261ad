// Detailed profiling of a running PyTorch job turned on from the dashboard
// (issue 25): the real server, the agent around a real CPU training loop
// (Debian's python3-torch, /usr/bin/python3, tests/data/frameworks/
// torch_training_loop.py with debugplane_profiler), and Chromium. The
// profiling controls ask for steps 200-219; the Nodes view then shows time
// per step for exactly those steps and framework phases. Without torch it
// fails, naming what to install (scripts/install-deps.sh installs it).

import {describe, test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import {spawnSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {startServer, createJob, jobRequest, startAgent, openBrowser, screenshot, waitFor,
  DATA_DIR} from './harness.mjs';

const JOB = 'torch-dashboard-job';
const PYTHON = '/usr/bin/python3';
const LOOP = path.join(DATA_DIR, 'frameworks', 'torch_training_loop.py');
const hasTorch = spawnSync(PYTHON, ['-c', 'import torch'], {stdio: 'ignore'}).status === 0;

describe('detailed profiling of a PyTorch job from the dashboard', () => {
  let server;
  let agent;
  let browser;
  let page;

  before(async () => {
    assert.ok(hasTorch, `${PYTHON} cannot import torch: install Debian's python3-torch (scripts/install-deps.sh)`);
    server = await startServer();
    const dir = server.dataDir;
    createJob(server, jobRequest(JOB, {tensors: path.join(dir, JOB, 'tensors'),
      profiler: path.join(dir, JOB, 'profiler'), rules: [], profilerRules: ['OverallFrameworkMetrics']}));
    browser = await openBrowser();
    page = await browser.newPage();
  });

  after(async () => {
    if (browser) await browser.close();
    if (agent) await agent.stop();
    if (server) await server.stop();
  });

  test('steps 200-219 asked for on the page are the Nodes view\'s traced steps', async () => {
    // 260 steps; the loop waits at step 100 until some profiling is asked for.
    agent = startAgent(server, JOB, server.dataDir, [LOOP, '260', '100'], {program: PYTHON});
    await page.goto(server.http + '/');
    await page.click(`tr[data-job="${JOB}"] a.job-link`);
    await page.locator('#job-status:has-text("Training")').waitFor({timeout: 60000});
    await page.click('nav.tabs a:has-text("Nodes")');
    assert.equal(await page.locator('#step-times[data-steps]:not([data-steps=""])').count(), 0,
        'steps shown before profiling was turned on');

    await page.click('#profiling-toggle');
    await page.locator('#profiling-panel').waitFor();
    await page.check('#pf-enabled');
    await page.check('#pf-detailedProfiling-on');
    await page.check('#pf-detailedProfiling-bystep');
    await page.fill('#pf-detailedProfiling-startStep', '200');
    await page.fill('#pf-detailedProfiling-numSteps', '20');
    await page.click('#profiling-submit');
    await page.locator('#profiling-message:has-text("updated")').waitFor();
    await page.click('#profiling-toggle');

    const expected = Array.from({length: 20}, (_, i) => String(200 + i)).join(' ');
    const steps = page.locator('#step-times');
    let shown = null;
    try {
      await waitFor(async () => (shown = await steps.getAttribute('data-steps')) === expected,
          'the Nodes view\'s steps to be 200-219', 90000, 250);
    } catch (error) {
      const traces = fs.readdirSync(path.join(server.dataDir, JOB), {recursive: true})
          .filter((f) => f.includes('pytorch'));
      const reply = await page.evaluate(async (job) => (await fetch(`/api/jobs/${job}/framework?width=20`)).text(), JOB);
      assert.fail(`${error.message}: shown ${JSON.stringify(shown)}; files ${traces.join(', ')}; ` +
          `framework: ${reply.slice(0, 3000)}; ` +
          `agent log: ${agent.log().slice(-3000)}`);
    }
    // The framework phases chart has data (not its empty text).
    await page.locator('#chart-framework .u-over').waitFor();
    await screenshot(page, 'pytorch-nodes-traced-steps');
    // The timer is cleared: left pending, it kept node running 60 s more.
    let timer;
    const code = await Promise.race([agent.exited,
      new Promise((resolve) => { timer = setTimeout(() => resolve('still running after 60 s'), 60000); })]);
    clearTimeout(timer);
    assert.equal(code, 0, agent.log().slice(-2000));
    assert.match(agent.log(), /trained 260 steps/);
  });

  test('no console errors or CSP violations', () => {
    browser.assertNoProblems([]);
  });
});
