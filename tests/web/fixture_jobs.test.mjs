// The dashboard's views over recorded data (tests/data): a job with real
// smdebug tensors and 15 minutes of system metrics, and one with framework
// profiling (step events, forward passes) of a PyTorch run. Checks what each
// view shows and saves a screenshot of it.

import {describe, test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import {startServer, createJob, jobRequest, openBrowser, screenshot, copyTree, waitFor,
  DATA_DIR} from './harness.mjs';

const SYSTEM_JOB = 'fixture-system-job';
const FRAMEWORK_JOB = 'fixture-framework-job';
const TENSORBOARD_JOB = 'fixture-tensorboard-job';

describe('dashboard views over recorded data', () => {
  let server;
  let browser;
  let page;

  before(async () => {
    server = await startServer();
    const dir = server.dataDir;
    copyTree(path.join(DATA_DIR, 'smdebug', 'healthy'), path.join(dir, SYSTEM_JOB, 'tensors'));
    copyTree(path.join(DATA_DIR, 'profiler', 'system', 'healthy'), path.join(dir, SYSTEM_JOB, 'profiler'));
    createJob(server, jobRequest(SYSTEM_JOB, {tensors: path.join(dir, SYSTEM_JOB, 'tensors'),
      profiler: path.join(dir, SYSTEM_JOB, 'profiler'),
      rules: ['ExplodingTensor', 'LossNotDecreasing', 'VanishingGradient'],
      profilerRules: ['LowGPUUtilization', 'CPUBottleneck', 'IOBottleneck']}));
    copyTree(path.join(DATA_DIR, 'profiler', 'framework', 'pytorch-step-outlier-debug'),
        path.join(dir, FRAMEWORK_JOB, 'tensors'));
    copyTree(path.join(DATA_DIR, 'profiler', 'framework', 'pytorch-step-outlier'),
        path.join(dir, FRAMEWORK_JOB, 'profiler'));
    createJob(server, jobRequest(FRAMEWORK_JOB, {tensors: path.join(dir, FRAMEWORK_JOB, 'tensors'),
      profiler: path.join(dir, FRAMEWORK_JOB, 'profiler'), rules: ['LossNotDecreasing'],
      profilerRules: ['StepOutlier']}));
    // Hugging Face Trainer's TensorBoard logs alone (issue 24).
    copyTree(path.join(DATA_DIR, 'frameworks', 'hf-trainer-overfit', 'tb'), path.join(dir, TENSORBOARD_JOB, 'tb'));
    const tensorboard = jobRequest(TENSORBOARD_JOB, {rules: ['Overfit']});
    delete tensorboard.DebugHookConfig;
    delete tensorboard.ProfilerConfig;
    tensorboard.TensorBoardOutputConfig = {S3OutputPath: path.join(dir, TENSORBOARD_JOB, 'tb')};
    createJob(server, tensorboard);
    browser = await openBrowser();
    page = await browser.newPage();
  });

  after(async () => {
    if (browser) await browser.close();
    if (server) await server.stop();
  });

  test('jobs view lists both jobs', async () => {
    await page.goto(`${server.http}/dashboard/#/jobs`);
    await page.locator(`tr[data-job="${SYSTEM_JOB}"]`).waitFor();
    await page.locator(`tr[data-job="${FRAMEWORK_JOB}"]`).waitFor();
    // Both rule sets concluded on the recorded data.
    await waitFor(async () => !/InProgress/.test(await page.locator(`tr[data-job="${SYSTEM_JOB}"] td.verdicts`).textContent()),
        'the rules of the system job to conclude', 60000);
    await screenshot(page, 'fixture-jobs');
  });

  test('overview: summary, utilization per node, insights', async () => {
    await page.goto(`${server.http}/dashboard/#/jobs/${SYSTEM_JOB}/overview`);
    const table = page.locator('#utilization-table');
    await table.waitFor();
    const text = await table.textContent();
    for (const metric of ['CPU', 'GPU', 'CPU memory', 'GPU memory', 'I/O wait']) assert.ok(text.includes(metric), `${metric} in ${text}`);
    assert.match(text, /algo-1/);
    await page.locator('#overview-insights details[data-rule="LowGPUUtilization"]').waitFor();
    await page.locator('#overview-insights details[data-rule="ExplodingTensor"][data-status="NoIssuesFound"]').waitFor({timeout: 60000});
    await page.click('details[data-rule="LowGPUUtilization"] summary');
    await screenshot(page, 'overview');
  });

  test('nodes: CPU cores on demand, heatmap rows per device, synced system and framework charts', async () => {
    await page.goto(`${server.http}/dashboard/#/jobs/${SYSTEM_JOB}/nodes`);
    await page.locator('#core-picker input[data-core="cpu0"]').waitFor();
    const legendCount = () => page.locator('#chart-cpu .u-legend .u-series').count();
    const before = await legendCount();
    await page.check('#core-picker input[data-core="cpu2"]');
    await waitFor(async () => (await legendCount()) === before + 1, 'cpu2 on the CPU chart');
    const heat = page.locator('#system-heatmap');
    await waitFor(async () => Number(await heat.getAttribute('height')) > 60, 'heatmap rows for 4 CPUs and a GPU');
    await screenshot(page, 'nodes');
  });

  test('nodes of the framework job: phases and time per step', async () => {
    await page.goto(`${server.http}/dashboard/#/jobs/${FRAMEWORK_JOB}/nodes`);
    await page.locator('#chart-framework .u-over').waitFor();
    await waitFor(async () => (await page.locator('#chart-framework .u-legend .u-series').count()) > 1, 'framework phases');
    await page.locator('#step-times .u-over').waitFor();
    await screenshot(page, 'nodes-framework');
    await page.goto(`${server.http}/dashboard/#/jobs/${FRAMEWORK_JOB}/overview`);
    await page.locator('#operations-table').waitFor();
    await page.locator('#overview-insights details[data-rule="StepOutlier"][data-status="IssuesFound"]').waitFor({timeout: 60000});
    await screenshot(page, 'overview-framework');
  });

  test('model: tensors by collection, TRAIN and EVAL side by side', async () => {
    await page.goto(`${server.http}/dashboard/#/jobs/${SYSTEM_JOB}/model`);
    await page.locator('#tensor-list details.collection').first().waitFor();
    const collections = await page.locator('#tensor-list details.collection > summary').allTextContents();
    assert.ok(collections.some((c) => c.startsWith('losses')), collections.join(','));
    await page.locator('#tensor-TRAIN .u-over').waitFor();
    await page.locator('#tensor-EVAL .u-over').waitFor();
    // A weight tensor: its mean, norm, min and max.
    const weight = page.locator('button.tensor', {hasText: /weight/}).first();
    await weight.click();
    await waitFor(async () => (await page.locator('#tensor-TRAIN .u-legend').textContent()).includes('norm'), 'norm of a weight');
    await screenshot(page, 'model');
  });

  test('model of a TensorBoard job: train/loss and eval/loss side by side', async () => {
    await page.goto(`${server.http}/dashboard/#/jobs/${TENSORBOARD_JOB}/model`);
    await page.locator('#tensor-list details.collection').first().waitFor({timeout: 30000});
    const collections = await page.locator('#tensor-list details.collection > summary').allTextContents();
    assert.ok(collections.some((c) => c.startsWith('losses')), collections.join(','));
    await page.locator('button.tensor[data-tensor="train/loss"]').first().click();
    await page.locator('#tensor-TRAIN .u-over').waitFor();
    await page.locator('#tensor-EVAL .u-over').waitFor();
    const titles = await page.locator('#tensor-view .columns').textContent();
    assert.ok(titles.includes('TRAIN · train/loss') && titles.includes('EVAL · eval/loss'), titles);
    await screenshot(page, 'model-tensorboard');
  });

  test('a missing job says so instead of a blank page', async () => {
    await page.goto(`${server.http}/dashboard/#/jobs/no-such-job/overview`);
    // What a person sees once the page has settled: the page says the job is
    // missing, naming it, and an alert gives the server's 404 for it. The page
    // asks for the job and for its overview at once; either 404 may come
    // first, so the alert may name either request.
    const missing = page.locator('#tab-body:has-text("No such training job")');
    await missing.waitFor();
    assert.match(await missing.textContent(), /no training job named no-such-job/);
    const alerts = await page.locator('.error-box').allTextContents();
    assert.ok(
        alerts.some((text) => /GET \/api\/jobs\/no-such-job(\/overview)? failed: 404 .*no-such-job/.test(text)),
        `no alert names the missing job: ${JSON.stringify(alerts)}`);
    await screenshot(page, 'missing-job');
  });

  test('no console errors or CSP violations', () => {
    browser.assertNoProblems([/status of 404/]);
  });

  test('the CSP is enforced and a violation would be caught', async () => {
    const other = await browser.newPage();
    await other.goto(`${server.http}/dashboard/#/jobs`);
    await other.locator(`tr[data-job="${SYSTEM_JOB}"]`).waitFor();
    const before = browser.problems.length;
    // What the page never does: an inline style attribute and an inline script.
    const applied = await other.evaluate(() => {
      const node = document.createElement('div');
      node.setAttribute('style', 'color: rgb(255, 0, 0)');
      document.body.append(node);
      const script = document.createElement('script');
      script.textContent = 'window.dpInlineRan = true;';
      document.body.append(script);
      return {color: getComputedStyle(node).color, ran: window.dpInlineRan === true};
    });
    assert.notEqual(applied.color, 'rgb(255, 0, 0)', 'an inline style was applied');
    assert.equal(applied.ran, false, 'an inline script ran');
    await waitFor(() => browser.problems.slice(before).filter((p) => /CSP violation|Content Security Policy/.test(p)).length >= 2,
        'the two violations in the collected problems', 5000);
    browser.problems.splice(before);
    await other.close();
  });
});
