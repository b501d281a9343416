// uPlot charts as every page draws them: as wide as their container, byte axes with readable
// ticks, drag to zoom on x and double-click to zoom out, a legend that follows the pointer,
// and a registry (window.fragscopeCharts) that tests and people can drive.
import uPlot from 'uplot';
import { formatBytes, formatSeconds } from './format.js';
import { byteStep, byteTicks, byteTickLabel } from './ticks.js';

export { uPlot };

export const COLOURS = {
  allocated: '#3d6fb6',
  reserved: '#7d9bd0',
  reservedFill: 'rgba(125,155,208,0.25)',
  free: '#5cb87a',
  pending: '#e0a030',
  wait: '#e0a030',
  compute: '#3d6fb6',
  oom: '#b3261e',
  capacity: '#b3261e',
  failing: 'rgba(179,38,30,0.08)',
  phase: 'rgba(91,63,179,0.08)',
  grid: '#eef1f5',
  text: '#1d2330',
  muted: '#5f6b7a',
};

const registry = {};
if (typeof window !== 'undefined') window.fragscopeCharts = registry;

/** The width a chart in `container` may take: its content box, never more than the viewport. */
export function widthOf(container) {
  const style = getComputedStyle(container);
  const padding = parseFloat(style.paddingLeft) + parseFloat(style.paddingRight);
  return Math.max(240, Math.min(container.clientWidth - padding, document.documentElement.clientWidth - 32));
}

/** A y axis in bytes whose ticks are 2^k or 5 × 2^k units; `height` decides how many. */
export function byteAxis(extra = {}) {
  return {
    size: 72,
    splits: (u, axisIndex, min, max) =>
      byteTicks(Math.max(0, min), max, Math.max(3, Math.floor(u.bbox.height / devicePixelRatio / 30))),
    values: (u, splits) => {
      const step = splits.length > 1 ? splits[1] - splits[0] : byteStep(0, splits[0] || 1, 4);
      return splits.map((v) => byteTickLabel(v, step));
    },
    grid: { stroke: COLOURS.grid },
    ticks: { stroke: COLOURS.grid },
    ...extra,
  };
}

/** An x axis in seconds (or trace events, when the trace records no time). */
export function xAxis(unit, extra = {}) {
  return {
    values: (u, splits) => {
      const span = u.scales.x.max - u.scales.x.min;
      return splits.map((v) => (unit === 's' ? formatSeconds(v, span) : `event ${Math.round(v)}`));
    },
    grid: { stroke: COLOURS.grid },
    ticks: { stroke: COLOURS.grid },
    ...extra,
  };
}

/** Whole numbers (steps) on an x axis, 1, 2 or 5 × 10^k apart, about 70 px apart at least. */
export function wholeNumberSplits(u, axisIndex, min, max) {
  const most = Math.max(1, Math.floor(u.bbox.width / devicePixelRatio / 70));
  let increment = 1;
  for (let k = 0; (max - min) / increment > most; k++) increment = [1, 2, 5][k % 3] * 10 ** Math.floor(k / 3);
  const splits = [];
  for (let v = Math.ceil(min / increment) * increment; v <= max; v += increment) splits.push(v);
  return splits;
}

export function bytesValue(u, v) {
  return v == null ? '–' : formatBytes(v);
}

/**
 * Makes a uPlot chart in `container`, registered as `name`, resized with the window.
 * `options` are uPlot's, without width (taken from the container).
 */
export function makeChart(name, container, options, data) {
  const chart = new uPlot(
    {
      width: widthOf(container),
      cursor: { drag: { x: true, y: false, setScale: true }, ...(options.cursor || {}) },
      ...options,
    },
    data,
    container,
  );
  // Double-click zooms out to where the chart began.
  const initial = { min: chart.scales.x.min, max: chart.scales.x.max };
  chart.over.addEventListener('dblclick', () => chart.setScale('x', initial));
  registry[name] = chart;
  return chart;
}

let resizeTimer = 0;
if (typeof window !== 'undefined')
  window.addEventListener('resize', () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      for (const chart of Object.values(registry))
        chart.setSize({ width: widthOf(chart.root.parentElement), height: chart.height });
    }, 100);
  });

/** Draws a vertical line at x = `value` with a label, inside the plot area. */
export function verticalMarker(u, value, colour, label, { dash = [], align = 'right', top = 14 } = {}) {
  if (value == null || value < u.scales.x.min || value > u.scales.x.max) return;
  const ctx = u.ctx;
  const x = Math.round(u.valToPos(value, 'x', true));
  ctx.save();
  ctx.strokeStyle = colour;
  ctx.lineWidth = 2 * devicePixelRatio;
  ctx.setLineDash(dash.map((d) => d * devicePixelRatio));
  ctx.beginPath();
  ctx.moveTo(x, u.bbox.top);
  ctx.lineTo(x, u.bbox.top + u.bbox.height);
  ctx.stroke();
  if (label) labelInside(u, label, x, u.bbox.top + top * devicePixelRatio, colour, align);
  ctx.restore();
}

/** Draws a horizontal line at y = `value` (scale `scale`) with a label kept inside the plot. */
export function horizontalMarker(u, value, colour, label, scale = 'y') {
  if (value == null) return;
  const ctx = u.ctx;
  const y = Math.round(u.valToPos(value, scale, true));
  if (y < u.bbox.top || y > u.bbox.top + u.bbox.height) return;
  ctx.save();
  ctx.strokeStyle = colour;
  ctx.lineWidth = 1.5 * devicePixelRatio;
  ctx.setLineDash([6 * devicePixelRatio, 4 * devicePixelRatio]);
  ctx.beginPath();
  ctx.moveTo(u.bbox.left, y);
  ctx.lineTo(u.bbox.left + u.bbox.width, y);
  ctx.stroke();
  // Below the line when there is no room above it.
  const room = y - u.bbox.top > 16 * devicePixelRatio;
  if (label)
    labelInside(u, label, u.bbox.left + 6 * devicePixelRatio, y + (room ? -5 : 14) * devicePixelRatio, colour, 'left');
  ctx.restore();
}

/** Text at (x, y) in canvas pixels, shifted so that it never leaves the plot area. */
export function labelInside(u, text, x, y, colour, align = 'left') {
  const ctx = u.ctx;
  ctx.save();
  ctx.font = `${600} ${12 * devicePixelRatio}px system-ui, sans-serif`;
  const width = ctx.measureText(text).width;
  const pad = 4 * devicePixelRatio;
  let left = align === 'right' ? x - width - pad : x + pad;
  left = Math.max(u.bbox.left + pad, Math.min(left, u.bbox.left + u.bbox.width - width - pad));
  ctx.fillStyle = 'rgba(255,255,255,0.85)';
  ctx.fillRect(
    left - 2 * devicePixelRatio,
    y - 11 * devicePixelRatio,
    width + 4 * devicePixelRatio,
    14 * devicePixelRatio,
  );
  ctx.fillStyle = colour;
  ctx.textAlign = 'left'; // uPlot leaves the axes' alignment set
  ctx.textBaseline = 'alphabetic';
  ctx.fillText(text, left, y);
  ctx.restore();
}

/** Shades [from, to] of the x scale across the plot. */
export function shadeRange(u, from, to, fill) {
  const lo = Math.max(from, u.scales.x.min);
  const hi = Math.min(to, u.scales.x.max);
  if (!(hi > lo)) return;
  const ctx = u.ctx;
  const x0 = u.valToPos(lo, 'x', true);
  const x1 = u.valToPos(hi, 'x', true);
  ctx.save();
  ctx.fillStyle = fill;
  ctx.fillRect(x0, u.bbox.top, x1 - x0, u.bbox.height);
  ctx.restore();
}

/** Labels a shaded [from, to] at its bottom left, when part of it is in view. */
export function labelRange(u, from, to, label, colour) {
  const lo = Math.max(from, u.scales.x.min);
  if (!label || !(Math.min(to, u.scales.x.max) > lo)) return;
  labelInside(u, label, u.valToPos(lo, 'x', true), u.bbox.top + u.bbox.height - 8 * devicePixelRatio, colour, 'left');
}
