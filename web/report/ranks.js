// One small chart per rank, all on one byte scale and one cursor: which rank is the outlier.
import { COLOURS, byteAxis, bytesValue, makeChart, wholeNumberSplits, xAxis } from '../common/chart.js';
import { formatBytes, formatPercent, formatSeconds } from '../common/format.js';

function rankTitle(r) {
  const parts = [`rank ${r.rank}`];
  if (r.oom) parts.push('ran out of memory');
  if (r.peak_reserved_bytes != null) parts.push(`peak reserved ${formatBytes(r.peak_reserved_bytes)}`);
  if (r.data_wait_fraction != null) parts.push(`data wait ${formatPercent(r.data_wait_fraction)}`);
  return parts.join(' · ');
}

/** The rank's memory series: its recorded curve, else its steps' reserved and allocated bytes. */
function seriesOf(r) {
  if (r.curve) return { unit: r.curve.x_unit, data: [r.curve.x, r.curve.reserved, r.curve.allocated] };
  if (r.steps && r.steps.reserved.some((v) => v != null))
    return { unit: 'step', data: [r.steps.step, r.steps.reserved, r.steps.allocated] };
  return null;
}

export function drawRanks(container, ranks) {
  let top = 1;
  for (const r of ranks) {
    const s = seriesOf(r);
    if (s) for (const column of s.data.slice(1)) for (const v of column) if (v != null) top = Math.max(top, v);
  }
  const grid = document.createElement('div');
  grid.className = 'rank-grid';
  container.appendChild(grid);
  for (const r of ranks) {
    const cell = document.createElement('div');
    cell.className = `rank-cell${r.worst ? ' worst' : ''}`;
    cell.dataset.rank = String(r.rank);
    const title = document.createElement('div');
    title.className = 'rank-title';
    title.textContent = rankTitle(r);
    cell.appendChild(title);
    grid.appendChild(cell);
    const s = seriesOf(r);
    if (!s) {
      cell.appendChild(
        Object.assign(document.createElement('p'), {
          className: 'note',
          textContent: 'no memory series for this rank',
        }),
      );
      continue;
    }
    const chartBox = document.createElement('div');
    cell.appendChild(chartBox);
    const xLabel = s.unit === 's' ? 'seconds' : s.unit === 'step' ? 'step' : 'trace event';
    makeChart(
      `rank-${r.rank}`,
      chartBox,
      {
        height: 150,
        legend: { show: false },
        cursor: { sync: { key: 'ranks' } },
        scales: { x: { time: false }, y: { range: () => [0, top * 1.05] } },
        series: [
          { label: xLabel, value: (u, v) => (s.unit === 's' ? formatSeconds(v, 1) : String(v)) },
          { label: 'reserved', stroke: COLOURS.reserved, fill: COLOURS.reservedFill, width: 1, value: bytesValue },
          { label: 'allocated', stroke: COLOURS.allocated, width: 1, value: bytesValue },
        ],
        axes: [
          xAxis(
            s.unit === 's' ? 's' : 'event',
            s.unit === 'step' ? { splits: wholeNumberSplits, values: (u, sp) => sp.map(String) } : {},
          ),
          byteAxis({ size: 60 }),
        ],
      },
      s.data,
    );
  }
}
