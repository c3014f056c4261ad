// The dashboard on a live job: the real server, the agent around a fake
// training that writes a NaN step part-way, and Chromium. The Jobs view
// lists the job, the Overview's ExplodingTensor insight turns IssuesFound
// without a reload, a drag on a Nodes chart zooms every chart and turns
// "Follow live" off, profiling turned on from the page reaches the job's
// ProfilerConfig and the agent's profilerconfig.json, and a bad field is
// named next to it. No console error or CSP violation on the way.

import {describe, test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {startServer, createJob, describeJob, jobRequest, startAgent, openBrowser,
  screenshot, waitFor} from './harness.mjs';

const JOB = 'live-nan-job';
// The training starts once the page shows the rule InProgress; at 50 ms per
// step the NaN step comes 2 s later; the training lasts 3 minutes.
const NAN_STEP = 40;

describe('dashboard on a live job', () => {
  let server;
  let agent;
  let browser;
  let page;

  before(async () => {
    server = await startServer();
    const dir = server.dataDir;
    createJob(server, jobRequest(JOB, {tensors: path.join(dir, JOB, 'tensors'),
      profiler: path.join(dir, JOB, 'profiler'), rules: ['ExplodingTensor', 'LossNotDecreasing']}));
    browser = await openBrowser();
    page = await browser.newPage();
  });

  after(async () => {
    if (browser) await browser.close();
    if (agent) await agent.stop();
    if (server) await server.stop();
  });

  test('the jobs view lists the job with its status and verdicts', async () => {
    await page.goto(server.http + '/');
    assert.match(page.url(), /\/dashboard\/.*#\/jobs$/);
    const row = page.locator(`tr[data-job="${JOB}"]`);
    await row.waitFor();
    await waitFor(async () => /InProgress/.test(await row.locator('td').nth(1).textContent()), 'status InProgress');
    await waitFor(async () => /2 InProgress/.test(await row.locator('td.verdicts').textContent()),
        'the rule verdicts in the row');
    // The status and name filters narrow the list.
    await page.selectOption('#filter-status', 'Completed');
    await page.locator('td.empty').waitFor();
    await page.selectOption('#filter-status', 'InProgress');
    await row.waitFor();
    await page.fill('#filter-name', 'no-such-job');
    await page.locator('td.empty').waitFor();
    await page.fill('#filter-name', 'live-nan');
    await row.waitFor();
    await page.locator('#live-state.on').waitFor();
    await screenshot(page, 'jobs');
  });

  test('a NaN step turns ExplodingTensor IssuesFound on the open page, without a reload', async () => {
    await page.click(`tr[data-job="${JOB}"] a.job-link`);
    await page.locator('#overview-insights details[data-rule="ExplodingTensor"]').waitFor();
    const status = () => page.locator('details[data-rule="ExplodingTensor"]').getAttribute('data-status');
    assert.equal(await status(), 'InProgress');
    await page.evaluate(() => { window.dpNotReloaded = true; });
    // Now the training starts, with the agent: it writes a NaN loss at NAN_STEP.
    agent = startAgent(server, JOB, server.dataDir, ['--steps', '3600', '--step-ms', '50', '--nan-at', String(NAN_STEP)]);
    await page.locator('#job-status:has-text("Training")').waitFor();
    await page.locator('details[data-rule="ExplodingTensor"][data-status="IssuesFound"]').waitFor({timeout: 60000});
    assert.equal(await page.evaluate(() => window.dpNotReloaded), true, 'the page reloaded');
    const found = await page.locator('details[data-rule="ExplodingTensor"] dl.found').textContent();
    assert.match(found, new RegExp(`Step${NAN_STEP}`), found);
    assert.match(await page.locator('#job-verdicts').textContent(), /\d+ IssuesFound/);
    await screenshot(page, 'overview-live');
  });

  test('a drag on a Nodes chart zooms the charts and stops following live data', async () => {
    await page.click('nav.tabs a:has-text("Nodes")');
    // The agent's host, connected and running (DescribeTrainingJob's TrainingHosts).
    const host = page.locator('#training-hosts tr[data-host][data-connected="true"]');
    await waitFor(async () => (await host.count()) === 1 && /Running/.test(await host.textContent()),
        'the training host, connected and Running, in the hosts table', 30000);
    // The agent's network series (ReceiveBytesPerSecond, TransmitBytesPerSecond) in bytes/s.
    await page.locator('#chart-network').waitFor({timeout: 30000});
    const cpu = page.locator('#chart-cpu');
    await waitFor(async () => {
      const [min, max] = await Promise.all([cpu.getAttribute('data-x-min'), cpu.getAttribute('data-x-max')]);
      return Number(max) - Number(min) > 3;
    }, 'a few seconds of CPU samples on the chart', 30000);
    assert.equal(await page.isChecked('#follow-live'), true);
    // Following: the charts show this test's data, nothing from long ago.
    const startedBefore = Date.now() / 1000 - 600;
    assert.ok(Number(await cpu.getAttribute('data-x-min')) > startedBefore,
        `the range starts at ${await cpu.getAttribute('data-x-min')}`);
    const before = Number(await cpu.getAttribute('data-x-max'));
    // Following: the range grows with new samples.
    await waitFor(async () => Number(await cpu.getAttribute('data-x-max')) > before, 'the chart to follow new data', 20000);
    await screenshot(page, 'nodes-live');
    const box = await page.locator('#chart-cpu .u-over').boundingBox();
    await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.5, box.y + box.height / 2, {steps: 5});
    await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2, {steps: 5});
    await page.mouse.up();
    assert.equal(await page.isChecked('#follow-live'), false, 'follow live is still on after a zoom');
    const zoomed = [Number(await cpu.getAttribute('data-x-min')), Number(await cpu.getAttribute('data-x-max'))];
    assert.ok(zoomed[0] > startedBefore && zoomed[1] <= before + 5 && zoomed[1] - zoomed[0] > 0, `zoomed range ${zoomed}`);
    // Every chart of the page shows the same range.
    const network = page.locator('#chart-system');
    assert.equal(Number(await network.getAttribute('data-x-min')), zoomed[0]);
    assert.equal(Number(await network.getAttribute('data-x-max')), zoomed[1]);
    // New data does not move a zoomed chart.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    assert.deepEqual([Number(await cpu.getAttribute('data-x-min')), Number(await cpu.getAttribute('data-x-max'))], zoomed);
    await screenshot(page, 'nodes-live-zoomed');
    // Follow live again: the whole range, growing.
    await page.check('#follow-live');
    await waitFor(async () => Number(await cpu.getAttribute('data-x-max')) > zoomed[1] + 1, 'the chart to follow again', 20000);
  });

  test('the model view shows the loss over steps', async () => {
    await page.click('nav.tabs a:has-text("Model")');
    await page.locator('button.tensor[data-tensor="CrossEntropyLoss_output_0"]').waitFor();
    await page.locator('#tensor-TRAIN .u-over').waitFor();
    await screenshot(page, 'model-live');
  });

  test('detailed profiling turned on from the page reaches the job and the agent', async () => {
    await page.click('#profiling-toggle');
    await page.locator('#profiling-panel').waitFor();
    await screenshot(page, 'profiling-panel');
    await page.check('#pf-enabled');
    await page.check('#pf-detailedProfiling-on');
    await page.check('#pf-detailedProfiling-bystep');
    await page.fill('#pf-detailedProfiling-startStep', '3000');
    await page.fill('#pf-detailedProfiling-numSteps', '3');
    await page.selectOption('#pf-interval', '200');
    await page.click('#profiling-submit');
    await page.locator('#profiling-message:has-text("updated")').waitFor();
    const config = describeJob(server, JOB).ProfilerConfig;
    assert.equal(config.ProfilingIntervalInMilliseconds, 200, JSON.stringify(config));
    const detailed = config.ProfilingParameters && config.ProfilingParameters.DetailedProfilingConfig;
    assert.ok(detailed, JSON.stringify(config));
    assert.match(detailed, /"StartStep"\s*:\s*3000/);
    assert.match(detailed, /"NumSteps"\s*:\s*3/);
    // The page shows the recorded configuration.
    await waitFor(async () => /steps 3000–3002/.test(await page.locator('#profiling-applied').textContent()),
        'the applied configuration on the page');
    // The agent wrote it for the training.
    const file = path.join(agent.configDir, 'profilerconfig.json');
    const written = await waitFor(() => {
      const text = fs.existsSync(file) && fs.readFileSync(file, 'utf8');
      return text && /3000/.test(text) && text;
    }, `profilerconfig.json with the detailed profiling (${file})`, 20000);
    const parsed = JSON.parse(written);
    // smdebug's layout: the interval is one of the ProfilingParameters.
    assert.equal(Number(parsed.ProfilingParameters.ProfilingIntervalInMilliseconds), 200, written);
    assert.match(parsed.ProfilingParameters.DetailedProfilingConfig, /3000/, written);
    await screenshot(page, 'profiling-applied');
  });

  test('a validation error is shown next to its field', async () => {
    await page.fill('#pf-detailedProfiling-numSteps', '-2');
    await page.click('#profiling-submit');
    const error = page.locator('[data-error-for="detailedProfiling.numSteps"]');
    await waitFor(async () => (await error.textContent()).length > 0, 'the error next to Number of steps');
    assert.match(await error.textContent(), /num|step|-2|positive/i);
    assert.equal(await page.locator('#pf-detailedProfiling-numSteps.invalid').count(), 1);
    // A value that is no number at all is named before anything is sent.
    await page.fill('#pf-detailedProfiling-numSteps', 'three');
    await page.click('#profiling-submit');
    await waitFor(async () => /three is not a number/.test(await error.textContent()), 'the client-side error');
    await screenshot(page, 'profiling-validation');
    // The job kept its configuration.
    assert.match(describeJob(server, JOB).ProfilerConfig.ProfilingParameters.DetailedProfilingConfig, /"NumSteps"\s*:\s*3\b/);
  });

  test('no console errors or CSP violations', () => {
    // The refused POST of the validation test is logged by Chromium as a failed resource.
    browser.assertNoProblems([/status of 400/]);
  });
});
