// Calls `fn` at most once per `ms`, trailing: bursts of events (one per new
// step) become one reload.

export function throttle(fn, ms) {
  let timer = null;
  let last = 0;
  const run = () => {
    timer = null;
    last = Date.now();
    fn();
  };
  const throttled = () => {
    if (timer) return;
    timer = setTimeout(run, Math.max(0, last + ms - Date.now()));
  };
  throttled.cancel = () => clearTimeout(timer);
  return throttled;
}
