// The dashboard's JSON API (docs/dashboard-api.md): fetches that throw an
// ApiError saying which request failed and why, the session and its CSRF
// token, and the server-sent event stream.

/** A failed request: `message` names the method, the path and the cause. */
export class ApiError extends Error {
  constructor(method, path, status, body) {
    const cause = body && body.error ? body.error : (status ? `HTTP ${status}` : 'no reply');
    super(`${method} ${path} failed: ${status ? status + ' ' : ''}${cause}`);
    this.status = status;
    this.field = body && body.field;
    this.cause = cause;
  }
}

const session = {role: null, principal: null, csrfToken: null, authRequired: false};

/** The current session ({role, principal, csrfToken, authRequired}). */
export function currentSession() {
  return session;
}

/** True when the signed-in role may change a job's profiling. */
export function mayChangeProfiling() {
  return session.role === 'admin' || session.role === 'operator';
}

async function request(method, path, body) {
  const headers = {'Accept': 'application/json'};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && session.csrfToken) headers['X-CSRF-Token'] = session.csrfToken;
  let response;
  try {
    response = await fetch(path, {
      method, headers, credentials: 'same-origin',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (error) {
    throw new ApiError(method, path, 0, {error: `the server cannot be reached (${error.message})`});
  }
  let json = null;
  const text = await response.text();
  if (text) {
    try {
      json = JSON.parse(text);
    } catch {
      if (response.ok) throw new ApiError(method, path, response.status, {error: 'the reply is not JSON'});
    }
  }
  if (!response.ok) {
    // A session that ended (expired, signed out elsewhere, key removed): back to the sign-in form.
    if (response.status === 401 && path !== '/api/session' && session.role) {
      window.dispatchEvent(new CustomEvent('dp-signed-out'));
    }
    throw new ApiError(method, path, response.status, json);
  }
  return json;
}

export const api = {
  get: (path) => request('GET', path),
  post: (path, body) => request('POST', path, body),
  del: (path) => request('DELETE', path),
};

/** A job's route: /api/jobs/NAME/rest, the name escaped. */
export function jobPath(name, rest = '') {
  return `/api/jobs/${encodeURIComponent(name)}${rest ? '/' + rest : ''}`;
}

/** Loads the session; null when not signed in (401). */
export async function loadSession() {
  try {
    Object.assign(session, await api.get('/api/session'));
    return session;
  } catch (error) {
    if (error.status === 401) {
      Object.assign(session, {role: null, principal: null, csrfToken: null, authRequired: true});
      return null;
    }
    throw error;
  }
}

/** Signs in with `token` (KEY:SECRET); throws ApiError on a wrong token. */
export async function signIn(token) {
  Object.assign(session, await api.post('/api/session', {token}));
  session.authRequired = true;
  return session;
}

/** Ends the session. */
export async function signOut() {
  await api.del('/api/session');
  Object.assign(session, {role: null, principal: null, csrfToken: null});
}

/**
 * Subscribes to /api/events (of one job when `job` is given). Calls
 * onJob(summary) and onData({name, lastDataTime, lastStep}); onState(open)
 * when the stream opens or breaks (EventSource reconnects by itself).
 * Returns a function that closes the stream.
 */
export function subscribe({job, onJob, onData, onState}) {
  const url = job ? `/api/events?job=${encodeURIComponent(job)}` : '/api/events';
  const source = new EventSource(url);
  const parse = (handler) => (event) => {
    if (!handler) return;
    let value;
    try {
      value = JSON.parse(event.data);
    } catch {
      return;
    }
    handler(value);
  };
  source.addEventListener('job', parse(onJob));
  source.addEventListener('data', parse(onData));
  source.addEventListener('open', () => onState && onState(true));
  source.addEventListener('error', () => onState && onState(false));
  return () => source.close();
}
