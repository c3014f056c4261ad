// The dashboard's entry point: session check (sign-in form on 401), the hash
// router (#/jobs, #/jobs/NAME/overview|nodes|model) and the header.

import {currentSession, loadSession, signOut} from './api.js';
import {el, replace, errorBox} from './dom.js';
import {mountJobs} from './view_jobs.js';
import {mountJob} from './view_job.js';
import {mountSignIn} from './view_signin.js';

const app = document.getElementById('app');
const crumbs = document.getElementById('crumbs');
const sessionBox = document.getElementById('session');
const banner = document.getElementById('banner');

let unmount = null;

/** Shows `message` in the banner at the top (null hides it). */
export function showBanner(message) {
  banner.hidden = !message;
  banner.textContent = message || '';
}

function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (parts[0] === 'jobs' && parts[1]) {
    const tab = ['overview', 'nodes', 'model'].includes(parts[2]) ? parts[2] : 'overview';
    return {view: 'job', name: parts[1], tab};
  }
  return {view: 'jobs'};
}

function renderCrumbs(route) {
  const items = [el('a', {href: '#/jobs'}, 'Jobs')];
  if (route.view === 'job') {
    items.push(el('span', {class: 'sep'}, '/'),
        el('a', {href: `#/jobs/${encodeURIComponent(route.name)}/overview`}, route.name),
        el('span', {class: 'sep'}, '/'),
        el('span', {}, route.tab[0].toUpperCase() + route.tab.slice(1)));
  }
  replace(crumbs, items);
}

function renderSession() {
  const session = currentSession();
  if (!session.role) {
    replace(sessionBox);
    return;
  }
  const who = session.authRequired ? `${session.principal} · ${session.role}` : 'no sign-in required · admin';
  replace(sessionBox, el('span', {class: 'who', title: 'Signed in as'}, who),
      session.authRequired && el('button', {class: 'link', type: 'button', onclick: async () => {
        try {
          await signOut();
        } catch (error) {
          showBanner(error.message);
        }
        start();
      }}, 'Sign out'));
}

let currentKey = null;

function route() {
  const current = parseRoute();
  // A tab change within one job keeps the job shell (and its event stream).
  const key = current.view === 'job' ? `job:${current.name}` : 'jobs';
  renderCrumbs(current);
  if (key === currentKey && unmount && unmount.setTab) {
    unmount.setTab(current.tab);
    return;
  }
  if (unmount) unmount();
  currentKey = key;
  replace(app);
  unmount = current.view === 'job' ? mountJob(app, current.name, current.tab) : mountJobs(app);
}

async function start() {
  showBanner(null);
  if (unmount) unmount();
  unmount = null;
  currentKey = null;
  let session;
  try {
    session = await loadSession();
  } catch (error) {
    replace(app, errorBox(error));
    return;
  }
  renderSession();
  if (!session) {
    replace(crumbs);
    replace(app);
    mountSignIn(app, () => start());
    return;
  }
  route();
}

window.addEventListener('dp-signed-out', () => start());
// What breaks in the page itself is said on the page, not only in the console.
window.addEventListener('error', (event) => {
  // Chromium reports a ResizeObserver that resized what it observes as an error; it is harmless.
  if (/ResizeObserver loop/.test(event.message)) return;
  showBanner(`The page failed: ${event.message}`);
});
window.addEventListener('unhandledrejection', (event) =>
  showBanner(`The page failed: ${event.reason && event.reason.message || event.reason}`));
if (typeof window.uPlot === 'undefined') showBanner('The chart library (uPlot.iife.min.js) did not load: charts cannot be drawn.');

window.addEventListener('hashchange', () => {
  if (currentSession().role) route();
});
if (!location.hash) history.replaceState(null, '', '#/jobs');
start();
