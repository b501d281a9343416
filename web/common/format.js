// Numbers in words, as the C++ renderers write them (src/util/bytes.cpp), so a figure reads
// the same in the text report and on the page.

const UNITS = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

/** Two decimals rounded as C++'s fmt does: an exact tie goes to the even digit (1017.125 → 1017.12). */
function twoDecimals(value) {
  const scaled = value * 100;
  const floor = Math.floor(scaled);
  const rest = scaled - floor;
  const n = rest > 0.5 || (rest === 0.5 && floor % 2 === 1) ? floor + 1 : floor;
  return (n / 100).toFixed(2);
}

/** "38.64 GiB", "512 bytes": two decimals in the largest binary unit below the value. */
export function formatBytes(bytes) {
  if (bytes == null || !Number.isFinite(bytes)) return '–';
  const sign = bytes < 0 ? '-' : '';
  let value = Math.abs(bytes);
  if (value < 1024) return `${sign}${Math.round(value)} bytes`;
  value /= 1024;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${sign}${twoDecimals(value)} ${UNITS[unit]}`;
}

/** Seconds with as many decimals as the span shown needs. */
export function formatSeconds(seconds, span = seconds) {
  if (seconds == null || !Number.isFinite(seconds)) return '–';
  const decimals = span >= 100 ? 0 : span >= 10 ? 1 : span >= 1 ? 2 : 3;
  return `${seconds.toFixed(decimals)} s`;
}

export function formatPercent(fraction, decimals = 1) {
  return fraction == null ? '–' : `${(100 * fraction).toFixed(decimals)}%`;
}
