// Performance marks the page sets once per page load, for tools that time
// it (bench/dashboard_page_bench.mjs, the browser tests): their startTime is
// milliseconds since the navigation started.
//   dp-first-chart    the first chart drew data (a time chart's or the
//                     heatmap's canvas, or the Overview's summary and
//                     utilization, which has no time chart)
//   dp-view-loaded    the view's first load is drawn (every reply rendered)
//   dp-<reply>-received, dp-<reply>-rendered   per reply of a view

const done = new Set();

/** Sets the mark `name` unless this page has set it already. */
export function markOnce(name) {
  if (done.has(name) || typeof performance === 'undefined' || !performance.mark) return;
  done.add(name);
  performance.mark(name);
}

/** markOnce(name) once the browser has drawn the current frame. */
export function markAfterFrame(name) {
  requestAnimationFrame(() => markOnce(name));
}
