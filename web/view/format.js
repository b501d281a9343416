// How numbers read on the page.

import { formatBytes } from '../common/format.js';

/** "38.64 GiB", "512 bytes": as the C++ reports write sizes (web/common/format.js). */
export const bytes = formatBytes;

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
