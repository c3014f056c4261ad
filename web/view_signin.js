// The sign-in form, shown when GET /api/session answers 401.

import {signIn} from './api.js';
import {el} from './dom.js';

/** Renders the form into `container`; calls onSignedIn() after a sign-in. */
export function mountSignIn(container, onSignedIn) {
  const token = el('input', {id: 'signin-token', name: 'token', type: 'password', required: true,
    autocomplete: 'current-password', placeholder: 'ACCESS_KEY_ID:SECRET_ACCESS_KEY'});
  const message = el('p', {class: 'field-error', id: 'signin-error', role: 'alert'});
  const button = el('button', {type: 'submit', class: 'primary'}, 'Sign in');
  const form = el('form', {class: 'signin card', onsubmit: async (event) => {
    event.preventDefault();
    message.textContent = '';
    button.disabled = true;
    try {
      await signIn(token.value.trim());
      onSignedIn();
    } catch (error) {
      message.textContent = error.status === 401 ? `Not signed in: ${error.cause}` : error.message;
      button.disabled = false;
    }
  }},
  el('h2', {}, 'Sign in to debugplane'),
  el('p', {class: 'muted'}, 'Use the access key of the server\'s credentials file, as for the CLI (--token).'),
  el('label', {for: 'signin-token'}, 'Token'), token, message, button);
  container.append(form);
  token.focus();
  return () => {};
}
