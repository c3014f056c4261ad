// Zooming the Nodes charts (issue 27): a drag asks the real server for the
// series of the visible range only, in finer buckets (the same point
// budget), and draws them; a zoom the server refuses says why above the
// charts, which keep what they showed; "Show all" asks for the whole job
// again. 15 minutes of recorded system metrics (tests/data).

import {describe, test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import {startServer, createJob, jobRequest, openBrowser, screenshot, copyTree, waitFor,
  DATA_DIR} from './harness.mjs';

const JOB = 'zoom-job';

describe('zooming the Nodes charts', () => {
  let server;
  let browser;
  let page;
  const systemRequests = [];

  before(async () => {
    server = await startServer();
    const profiler = path.join(server.dataDir, JOB, 'profiler');
    copyTree(path.join(DATA_DIR, 'profiler', 'system', 'healthy'), profiler);
    const request = jobRequest(JOB, {profiler, rules: []});
    delete request.DebugHookConfig;
    delete request.DebugRuleConfigurations;
    createJob(server, request);
    browser = await openBrowser();
    page = await browser.newPage();
    page.on('request', (r) => {
      if (/\/api\/jobs\/[^/]+\/system\?/.test(r.url())) systemRequests.push(new URL(r.url()));
    });
  });

  after(async () => {
    if (browser) await browser.close();
    if (server) await server.stop();
  });

  const cpu = () => page.locator('#chart-cpu');
  const bucketSeconds = async () => Number(await page.locator('#series-resolution').getAttribute('data-bucket-seconds'));
  const xRange = async () => [Number(await cpu().getAttribute('data-x-min')), Number(await cpu().getAttribute('data-x-max'))];

  async function drag(from, to) {
    const box = await page.locator('#chart-cpu .u-over').boundingBox();
    await page.mouse.move(box.x + box.width * from, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * ((from + to) / 2), box.y + box.height / 2, {steps: 4});
    await page.mouse.move(box.x + box.width * to, box.y + box.height / 2, {steps: 4});
    await page.mouse.up();
  }

  let whole;  // bucket seconds of the whole job
  let zoomed;  // the first zoom's [min, max]

  test('a drag asks for finer buckets of the visible range and draws them', async () => {
    await page.goto(`${server.http}/dashboard/#/jobs/${JOB}/nodes`);
    await page.locator('#chart-cpu .u-over').waitFor();
    await waitFor(async () => (await bucketSeconds()) > 0, 'the resolution of the whole job');
    whole = await bucketSeconds();
    const [min, max] = await xRange();
    assert.ok(max - min > 600, `the whole job (15 minutes) on the chart: ${min}..${max}`);
    const asked = systemRequests.length;
    const frameworkReply = page.waitForEvent('requestfinished', (r) => /\/framework\?.*start=/.test(r.url()));
    await drag(0.4, 0.5);
    zoomed = await xRange();
    assert.ok(zoomed[1] - zoomed[0] < (max - min) / 5, `zoomed to ${zoomed}`);
    await waitFor(async () => (await bucketSeconds()) < whole / 4, `finer buckets than ${whole} s`);
    // One request for the range (the page waits for the drag to settle).
    const ranged = systemRequests.slice(asked).filter((u) => u.searchParams.has('start'));
    assert.equal(ranged.length, 1, ranged.map(String).join('\n'));
    assert.ok(Math.abs(Number(ranged[0].searchParams.get('start')) - zoomed[0]) < 0.01, String(ranged[0]));
    assert.ok(Math.abs(Number(ranged[0].searchParams.get('end')) - zoomed[1]) < 0.01, String(ranged[0]));
    assert.equal(ranged[0].searchParams.get('width'), '800');
    // The chart holds the range's points (many, not the few of the whole
    // job's buckets that fall in it) and still shows the range.
    const points = Number(await cpu().getAttribute('data-points'));
    assert.ok(points > 5 * ((zoomed[1] - zoomed[0]) / whole), `${points} points in the range`);
    assert.deepEqual(await xRange(), zoomed);
    assert.match(await page.locator('#series-resolution').textContent(), /per point/);
    // The range's framework phases were asked for too; this job has none:
    // still said so, not a chart of zeros.
    assert.equal((await (await frameworkReply).response()).status(), 200);
    await new Promise((resolve) => setTimeout(resolve, 500));  // for the page to draw it
    assert.equal(await page.locator('#chart-framework').count(), 0);
    await page.locator('text=No framework metrics').waitFor();
    await screenshot(page, 'nodes-zoomed');
  });

  test('a zoom the server refuses says why; the charts keep their data', async () => {
    const points = await cpu().getAttribute('data-points');
    const resolution = await bucketSeconds();
    // The real server answers the zoom's request, made invalid on the way.
    await page.route(/\/system\?.*start=/, (route) =>
      route.continue({url: route.request().url().replace(/width=\d+/, 'width=99999')}));
    await drag(0.3, 0.6);
    const alert = page.locator('.error-box', {hasText: 'width must be 1..4000'});
    await alert.waitFor();
    assert.match(await alert.textContent(), /GET \/api\/jobs\/zoom-job\/system\?.* failed: 400/);
    assert.equal(await cpu().getAttribute('data-points'), points);
    assert.equal(await bucketSeconds(), resolution);
    await screenshot(page, 'nodes-zoom-refused');
    await page.unroute(/\/system\?.*start=/);
    // "Show all": the whole job again, and the alert goes.
    await page.click('#reset-zoom');
    await waitFor(async () => (await bucketSeconds()) === whole, 'the whole job\'s buckets again');
    await waitFor(async () => (await page.locator('.error-box').count()) === 0, 'the alert to go');
    assert.equal(await page.isChecked('#follow-live'), true);
  });

  test('no console errors or CSP violations', () => {
    // The refused request itself is logged by Chromium.
    browser.assertNoProblems([/status of 400/]);
  });
});
