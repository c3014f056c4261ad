// The XGBoost training report from the dashboard, as a person opens it: a job
// with CreateXgboostReport on a real XGBoost trial (tests/data/xgboost/binary),
// its rule in the Overview's insights with an "Open the report" link, and the
// report page that link opens (in a tab of its own). Saves screenshots of both.

import {describe, test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import {startServer, createJob, jobRequest, openBrowser, screenshot, copyTree,
  DATA_DIR} from './harness.mjs';

const JOB = 'xgboost-report-job';

describe('the XGBoost training report in the dashboard', () => {
  let server;
  let browser;
  let page;

  before(async () => {
    server = await startServer();
    const dir = server.dataDir;
    copyTree(path.join(DATA_DIR, 'xgboost', 'binary'), path.join(dir, JOB, 'tensors'));
    createJob(server, jobRequest(JOB, {tensors: path.join(dir, JOB, 'tensors'),
      profiler: path.join(dir, JOB, 'profiler'), rules: ['CreateXgboostReport']}));
    browser = await openBrowser();
    page = await browser.newPage();
  });

  after(async () => {
    if (browser) await browser.close();
    if (server) await server.stop();
  });

  test('the rule links to its report, which opens as a page', async () => {
    await page.goto(`${server.http}/dashboard/#/jobs/${JOB}/overview`);
    const rule = page.locator('#overview-insights details[data-rule="CreateXgboostReport"][data-status="NoIssuesFound"]');
    await rule.waitFor({timeout: 60000});
    await rule.locator('summary').click();
    const link = rule.locator('a.report-link');
    await link.waitFor();
    await screenshot(page, 'xgboost-report-insight');
    const [report] = await Promise.all([page.context().waitForEvent('page'), link.click()]);
    await report.waitForLoadState();
    assert.match(await report.title(), /XGBoost training report/);
    assert.equal(await report.locator('#task').textContent(), 'binary classification');
    await report.locator('#roc-chart').waitFor();
    await report.locator('#confusion-matrix').waitFor();
    assert.match(await report.locator('#auc').textContent(), /^0\.99\d\d$/);
    await screenshot(report, 'xgboost-report-page');
  });
});
