// The run's other clocks: nvidia-smi's samples and the step telemetry, each on its own axis.
import uPlot from 'uplot';
import { COLOURS, byteAxis, bytesValue, makeChart, wholeNumberSplits, xAxis } from '../common/chart.js';
import { formatSeconds } from '../common/format.js';

export function drawSmiTrace(container, smi) {
  const data = [smi.seconds, smi.utilization_max, smi.utilization_min, smi.memory_used];
  const percent = (u, v) => (v == null ? '–' : `${v.toFixed(0)}%`);
  return makeChart(
    'smi-trace',
    container,
    {
      height: 240,
      scales: { x: { time: false }, pct: { range: [0, 100] }, mem: { range: (u, min, max) => [0, max * 1.1 || 1] } },
      series: [
        { label: 'time', value: (u, v) => (v == null ? '–' : formatSeconds(v, 0.01)) },
        {
          label: `GPU ${smi.gpu ?? ''} utilisation (highest)`,
          scale: 'pct',
          stroke: '#2e8540',
          width: 1.5,
          value: percent,
        },
        { label: 'utilisation (lowest)', scale: 'pct', stroke: 'rgba(46,133,64,0.4)', width: 1, value: percent },
        { label: 'memory used', scale: 'mem', stroke: COLOURS.reserved, width: 1.5, value: bytesValue },
      ],
      bands: [{ series: [1, 2], fill: 'rgba(46,133,64,0.15)' }],
      axes: [
        xAxis('s', { label: 'seconds since the first sample', labelSize: 20 }),
        { scale: 'pct', size: 50, values: (u, splits) => splits.map((v) => `${v}%`), grid: { stroke: COLOURS.grid } },
        byteAxis({ scale: 'mem', side: 1, grid: { show: false } }),
      ],
    },
    data,
  );
}

export function drawStepTimes(container, steps) {
  const total = steps.wait_ms.map((w, i) => w + steps.compute_ms[i]);
  const data = [steps.step, total, steps.compute_ms];
  const ms = (u, v) => (v == null ? '–' : `${v.toFixed(1)} ms`);
  const bars = uPlot.paths.bars({ size: [0.8, 40], align: 0 });
  return makeChart(
    'step-times',
    container,
    {
      height: 220,
      // Half a bar either side of the first and last steps (uPlot widens a one-point range to 0..100).
      scales: {
        x: { time: false, auto: false, min: steps.step[0] - 0.6, max: steps.step[steps.step.length - 1] + 0.6 },
        y: { range: (u, min, max) => [0, max * 1.08 || 1] },
      },
      series: [
        { label: 'step', value: (u, v) => (v == null ? '–' : String(v)) },
        {
          label: 'waiting for data + computing',
          stroke: COLOURS.wait,
          fill: COLOURS.wait,
          paths: bars,
          points: { show: false },
          value: (u, v, s, i) => (i == null ? '–' : `${(v - steps.compute_ms[i]).toFixed(1)} ms wait`),
        },
        {
          label: 'computing',
          stroke: COLOURS.compute,
          fill: COLOURS.compute,
          paths: bars,
          points: { show: false },
          value: ms,
        },
      ],
      axes: [
        {
          label: 'step',
          labelSize: 20,
          grid: { show: false },
          splits: wholeNumberSplits,
          values: (u, splits) => splits.map(String),
        },
        {
          size: 64,
          values: (u, splits) => splits.map((v) => (v >= 1000 ? `${+(v / 1000).toFixed(2)} s` : `${v} ms`)),
          grid: { stroke: COLOURS.grid },
        },
      ],
    },
    data,
  );
}
