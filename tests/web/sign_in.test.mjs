// Signing in to a server with --credentials: the page asks for a token, says
// when it is wrong, shows a reader the jobs but not the means to change
// profiling (and the server refuses the reader's POST), lets an operator
// change it, and refuses a cookie POST without the CSRF token.

import {describe, test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {startServer, createJob, describeJob, jobRequest, openBrowser, screenshot, tempDir,
  waitFor} from './harness.mjs';

const JOB = 'signed-in-job';
const ADMIN = 'AKIDWEBADMIN:web-admin-secret';
const OPERATOR = 'AKIDWEBOPERATOR:web-operator-secret';
const READER = 'AKIDWEBREADER:web-reader-secret';

describe('dashboard with credentials', () => {
  let server;
  let browser;
  let page;

  before(async () => {
    const dir = tempDir('signin');
    const credentials = path.join(dir, 'credentials');
    fs.writeFileSync(credentials, [
      '# ROLE ACCESS_KEY_ID SECRET_ACCESS_KEY',
      `admin ${ADMIN.replace(':', ' ')}`,
      `operator ${OPERATOR.replace(':', ' ')}`,
      `reader ${READER.replace(':', ' ')}`, ''].join('\n'), {mode: 0o600});
    server = await startServer({dataDir: path.join(dir, 'data'), args: ['--credentials', credentials]});
    createJob(server, jobRequest(JOB, {tensors: path.join(server.dataDir, JOB, 'tensors'),
      profiler: path.join(server.dataDir, JOB, 'profiler')}), {token: ADMIN});
    browser = await openBrowser();
    page = await browser.newPage();
  });

  after(async () => {
    if (browser) await browser.close();
    if (server) await server.stop();
  });

  async function signIn(token) {
    await page.locator('#signin-token').waitFor();
    await page.fill('#signin-token', token);
    await page.click('form.signin button[type=submit]');
  }

  test('a wrong token is refused on the form', async () => {
    await page.goto(`${server.http}/dashboard/`);
    await page.locator('#signin-token').waitFor();
    await screenshot(page, 'sign-in');
    await signIn('AKIDWEBREADER:not-the-secret');
    const error = page.locator('#signin-error');
    await waitFor(async () => (await error.textContent()).length > 0, 'the sign-in error');
    assert.doesNotMatch(await error.textContent(), /not-the-secret/);
    assert.equal(await page.locator('#jobs-rows').count(), 0);
  });

  test('a reader sees the job but may not change profiling', async () => {
    await signIn(READER);
    await page.locator(`tr[data-job="${JOB}"]`).waitFor();
    assert.match(await page.locator('#session').textContent(), /AKIDWEBREADER · reader/);
    await page.click(`tr[data-job="${JOB}"] a.job-link`);
    await page.click('#profiling-toggle');
    assert.equal(await page.isDisabled('#profiling-submit'), true);
    assert.match(await page.locator('#profiling-role-note').textContent(), /role reader/);
    await screenshot(page, 'reader-profiling');
    // The server refuses it too, even with the session's CSRF token.
    const reply = await page.evaluate(async (job) => {
      const session = await (await fetch('/api/session')).json();
      const response = await fetch(`/api/jobs/${job}/profiling`, {method: 'POST',
        headers: {'Content-Type': 'application/json', 'X-CSRF-Token': session.csrfToken},
        body: JSON.stringify({profilingEnabled: true, monitoringIntervalMillis: 1000,
          detailedProfiling: null, dataloaderProfiling: null, pythonProfiling: null})});
      return {status: response.status, body: await response.json()};
    }, JOB);
    assert.equal(reply.status, 403, JSON.stringify(reply));
    assert.match(reply.body.error, /reader/);
    assert.equal(describeJob(server, JOB, {token: ADMIN}).ProfilerConfig.ProfilingIntervalInMilliseconds, 500);
  });

  test('sign out leads back to the form', async () => {
    await page.click('#session button');
    await page.locator('#signin-token').waitFor();
    const status = await page.evaluate(async () => (await fetch('/api/jobs')).status);
    assert.equal(status, 401);
  });

  test('an operator changes profiling; a POST without the CSRF token is refused', async () => {
    await signIn(OPERATOR);
    // Signed in again, the page shows the view it showed (the reader's job).
    await page.locator('#session:has-text("AKIDWEBOPERATOR · operator")').waitFor();
    await page.locator('h1.job-name').waitFor();
    const refused = await page.evaluate(async (job) => (await fetch(`/api/jobs/${job}/profiling`, {method: 'POST',
      headers: {'Content-Type': 'application/json'},
      body: JSON.stringify({profilingEnabled: true, monitoringIntervalMillis: 1000})})).status, JOB);
    assert.equal(refused, 403);
    await page.goto(`${server.http}/dashboard/#/jobs/${JOB}/overview`);
    await page.click('#profiling-toggle');
    await page.selectOption('#pf-interval', '1000');
    await page.check('#pf-pythonProfiling-on');
    await page.fill('#pf-pythonProfiling-startStep', '10');
    await page.fill('#pf-pythonProfiling-numSteps', '2');
    await page.selectOption('#pf-python-profiler', 'pyinstrument');
    // Data loader profiling for a time range.
    await page.check('#pf-dataloaderProfiling-on');
    await page.check('#pf-dataloaderProfiling-bytime');
    await page.fill('#pf-dataloaderProfiling-startTime', '2030-01-02T03:04:05');
    await page.fill('#pf-dataloaderProfiling-duration', '30');
    await page.click('#profiling-submit');
    await page.locator('#profiling-message:has-text("updated")').waitFor();
    const config = describeJob(server, JOB, {token: ADMIN}).ProfilerConfig;
    assert.equal(config.ProfilingIntervalInMilliseconds, 1000);
    assert.match(config.ProfilingParameters.PythonProfilingConfig, /"StartStep"\s*:\s*10/);
    assert.match(config.ProfilingParameters.PythonProfilingConfig, /pyinstrument/i);
    const start = Math.round(new Date('2030-01-02T03:04:05').getTime() / 1000);  // the browser's zone is the test's
    assert.match(config.ProfilingParameters.DataloaderProfilingConfig, new RegExp(`"StartTimeInSecSinceEpoch"\\s*:\\s*${start}\\b`));
    assert.match(config.ProfilingParameters.DataloaderProfilingConfig, /"DurationInSeconds"\s*:\s*30\b/);
    await waitFor(async () => /for 30 s/.test(await page.locator('#profiling-applied').textContent()),
        'the time range in the applied configuration');
    await screenshot(page, 'operator-profiling');
  });

  test('no console errors or CSP violations', () => {
    // Expected refusals: 401 before sign-in and for the wrong token, 403 for the reader and the missing CSRF token.
    browser.assertNoProblems([/status of 401/, /status of 403/]);
  });
});
