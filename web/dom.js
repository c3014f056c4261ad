// Building DOM nodes without innerHTML: every string becomes a text node, so
// names, messages and values from training data are always shown as text.

/**
 * el('div', {class: 'x', onclick: fn, dataset: {field: 'a'}}, 'text', child)
 * Attributes named on* become listeners; `class` may be an array; children
 * that are strings or numbers become text nodes; null/false are skipped.
 */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      node.addEventListener(key.slice(2), value);
    } else if (key === 'class') {
      node.className = Array.isArray(value) ? value.filter(Boolean).join(' ') : value;
    } else if (key === 'dataset') {
      Object.assign(node.dataset, value);
    } else if (key in node && typeof value !== 'string') {
      node[key] = value;
    } else {
      node.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(node, children);
  return node;
}

/** Appends children (nodes, strings, arrays of them) to `node`. */
export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Replaces every child of `node` with `children`. */
export function replace(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

/** A section with a heading: the page's card. */
export function card(title, ...children) {
  return el('section', {class: 'card'}, el('h2', {}, title), ...children);
}

/** The status badge of a job or rule status (colour by class). */
export function badge(status) {
  return el('span', {class: ['badge', 'status-' + String(status || 'unknown')]}, status || '—');
}

/** A warning about the data (a file the server could not read), as text. */
export function problemBox(problem) {
  const text = typeof problem === 'string' ? problem : (problem && (problem.message || problem.error)) || JSON.stringify(problem);
  return el('div', {class: 'problem-box', role: 'status'}, text);
}

/** An error box saying what failed. */
export function errorBox(error) {
  return el('div', {class: 'error-box', role: 'alert'}, String(error && error.message || error));
}
