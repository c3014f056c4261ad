// Formatting numbers, times and durations for people.

const dateTime = new Intl.DateTimeFormat(undefined, {
  year: 'numeric', month: 'short', day: '2-digit',
  hour: '2-digit', minute: '2-digit', second: '2-digit',
});

/** Epoch seconds as a local date and time; '—' for null. */
export function formatTime(seconds) {
  if (seconds === null || seconds === undefined) return '—';
  return dateTime.format(new Date(seconds * 1000));
}

/** A duration in seconds as '1 h 02 min', '3 min 05 s', '4.2 s' or '120 ms'. */
export function formatDuration(seconds) {
  if (seconds === null || seconds === undefined || !isFinite(seconds)) return '—';
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  const whole = Math.round(seconds);
  const minutes = Math.floor(whole / 60);
  if (minutes < 60) return `${minutes} min ${String(whole % 60).padStart(2, '0')} s`;
  const hours = Math.floor(minutes / 60);
  return `${hours} h ${String(minutes % 60).padStart(2, '0')} min`;
}

/** How long ago `seconds` (epoch) was, from `now` (epoch seconds). */
export function formatAgo(seconds, now = Date.now() / 1000) {
  if (seconds === null || seconds === undefined) return 'no data yet';
  const age = Math.max(0, now - seconds);
  if (age < 2) return 'just now';
  return `${formatDuration(age).replace(/\.\d/, '')} ago`;
}

/** A value in `unit` ('percent', 'bytes_per_second', 'bytes', 'seconds'). */
export function formatValue(value, unit) {
  if (value === null || value === undefined || Number.isNaN(value)) return '—';
  switch (unit) {
    case 'percent': return `${value.toFixed(value < 10 ? 1 : 0)} %`;
    case 'bytes_per_second': return `${formatBytes(value)}/s`;
    case 'bytes': return formatBytes(value);
    case 'seconds': return formatDuration(value);
    default: return formatNumber(value);
  }
}

/** Bytes with a binary prefix. */
export function formatBytes(bytes) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = Math.abs(bytes);
  let i = 0;
  while (value >= 1024 && i < units.length - 1) { value /= 1024; i++; }
  return `${(Math.sign(bytes) * value).toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

/** A number with at most 4 significant digits, exponent when tiny or huge. */
export function formatNumber(value) {
  if (value === null || value === undefined) return '—';
  if (typeof value !== 'number') return String(value);
  if (!isFinite(value)) return String(value);
  const magnitude = Math.abs(value);
  if (magnitude !== 0 && (magnitude < 1e-3 || magnitude >= 1e6)) return value.toExponential(3);
  return String(Number(value.toPrecision(4)));
}

/** A share 0..1 as a percentage. */
export function formatShare(share) {
  if (share === null || share === undefined) return '—';
  return `${(share * 100).toFixed(1)} %`;
}
