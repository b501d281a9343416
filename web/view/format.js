// How numbers read on the page.

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

/** 1536 -> "1.50 KiB"; exact below 1 KiB. */
export function bytes(n) {
  if (n === null || n === undefined) return '–';
  let value = Math.abs(n);
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  const sign = n < 0 ? '-' : '';
  return unit === 0 ? `${sign}${value} B` : `${sign}${value.toFixed(2)} ${UNITS[unit]}`;
}

/** A change: "+1.50 GiB" / "-3.00 MiB". */
export function signedBytes(n) {
  return n > 0 ? `+${bytes(n)}` : bytes(n);
}

/** 1234567 -> "1,234,567". */
export function count(n) {
  return Number(n).toLocaleString('en-US');
}

/** Seconds since the trace's first event, from µs timestamps. */
export function sinceStart(timeUs, firstUs) {
  if (!timeUs || !firstUs) return '';
  return `${((timeUs - firstUs) / 1e6).toFixed(3)} s`;
}

/** A stable colour per allocation id (memory_viz's Tableau 10). */
const PALETTE = ['#4e79a7', '#f28e2c', '#e15759', '#76b7b2', '#59a14f', '#edc949', '#af7aa1', '#ff9da7', '#9c755f',
  '#bab0ab'];
export function colourOf(id) {
  let h = Math.imul(id, 2654435761);
  h ^= h >>> 15;
  return PALETTE[Math.abs(h) % PALETTE.length];
}

/** Frames as text lines "file:line in name", innermost first. */
export function frameLines(frames) {
  if (!frames || frames.length === 0) return ['(no stack recorded)'];
  return frames.map((f) => `${f.file}:${f.line === null ? '?' : f.line} in ${f.name}`);
}

/** A text element. */
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (key === 'class') node.className = value;
    else if (key.startsWith('data-')) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) node.append(child);
  return node;
}
