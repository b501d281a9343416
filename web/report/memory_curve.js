// Reserved and allocated over the trace, as the doctor recorded them: each point the extremes
// of its stretch, steps on the top axis, the failing step shaded, capacity and OOM marked.
import {
  COLOURS,
  byteAxis,
  bytesValue,
  horizontalMarker,
  labelRange,
  makeChart,
  shadeRange,
  verticalMarker,
  xAxis,
} from '../common/chart.js';
import { formatBytes, formatSeconds } from '../common/format.js';

/** Step ends inside [min, max], thinned to one per `gap` pixels. */
function visibleSteps(u, steps, gap) {
  const shown = [];
  let lastPos = -Infinity;
  for (const s of steps) {
    if (s.x < u.scales.x.min || s.x > u.scales.x.max) continue;
    const pos = u.valToPos(s.x, 'x');
    if (pos - lastPos >= gap) {
      shown.push(s);
      lastPos = pos;
    }
  }
  return shown;
}

export function drawMemoryCurve(container, curve) {
  const timed = curve.x_unit === 's';
  const data = [curve.x, curve.reserved, curve.reserved_min, curve.allocated, curve.allocated_min];
  let top = Math.max(...curve.reserved, ...curve.allocated);
  if (curve.capacity_bytes) top = Math.max(top, curve.capacity_bytes);
  const steps = curve.steps || [];
  const hasSteps = steps.length > 0;
  // Phases other than training between step ends, and the failing step.
  const ranges = [];
  for (let i = 1; i < steps.length; i++)
    if (steps[i].phase !== 'train')
      ranges.push({
        from: steps[i - 1].x,
        to: steps[i].x,
        fill: COLOURS.phase,
        label: steps[i].phase,
        colour: '#5b3fb3',
      });
  if (curve.failing && curve.oom) {
    const label = `${curve.failing.step != null ? `step ${curve.failing.step}, ` : ''}${curve.failing.phase}: failed`;
    ranges.push({ from: curve.failing.x, to: curve.oom.x, fill: COLOURS.failing, label, colour: COLOURS.oom });
  }
  const options = {
    height: 340,
    scales: { x: { time: false }, y: { range: () => [0, top * 1.06] } },
    series: [
      {
        label: timed ? 'time' : 'event',
        value: (u, v) => (v == null ? '–' : timed ? formatSeconds(v, 0.001) : `event ${v}`),
      },
      {
        label: 'reserved (highest)',
        stroke: COLOURS.reserved,
        fill: COLOURS.reservedFill,
        width: 1.5,
        value: bytesValue,
      },
      { label: 'reserved (lowest)', stroke: 'rgba(125,155,208,0.5)', width: 1, value: bytesValue },
      { label: 'allocated (highest)', stroke: COLOURS.allocated, width: 1.5, value: bytesValue },
      { label: 'allocated (lowest)', stroke: 'rgba(61,111,182,0.45)', width: 1, value: bytesValue },
    ],
    bands: [{ series: [3, 4], fill: 'rgba(61,111,182,0.22)' }],
    axes: [
      xAxis(curve.x_unit, { label: timed ? 'seconds since the trace began' : 'trace event', labelSize: 20 }),
      byteAxis(),
      {
        scale: 'x',
        side: 0,
        size: hasSteps ? 30 : 0,
        label: hasSteps ? 'step ends' : undefined,
        labelSize: 14,
        labelFont: '11px system-ui, sans-serif',
        splits: (u) => visibleSteps(u, steps, 26).map((s) => s.x),
        values: (u, splits) =>
          splits.map((x) => {
            const s = steps.find((m) => m.x === x);
            return s ? String(s.step) : '';
          }),
        grid: { show: hasSteps, stroke: 'rgba(29,35,48,0.16)', dash: [2, 3], width: 1 },
        ticks: { show: false },
      },
    ],
    hooks: {
      // Shading under the grid and the series; its labels over them.
      drawClear: [(u) => ranges.forEach((r) => shadeRange(u, r.from, r.to, r.fill))],
      draw: [
        (u) => {
          for (const r of ranges) labelRange(u, r.from, r.to, r.label, r.colour);
          if (curve.capacity_bytes)
            horizontalMarker(
              u,
              curve.capacity_bytes,
              COLOURS.capacity,
              `capacity ${formatBytes(curve.capacity_bytes)}`,
            );
          if (curve.oom)
            verticalMarker(u, curve.oom.x, COLOURS.oom, `OOM (event ${curve.oom.event})`, { align: 'right' });
        },
      ],
    },
  };
  const chart = makeChart('memory-curve', container, options, data);
  container.dataset.points = String(curve.x.length);
  return chart;
}
