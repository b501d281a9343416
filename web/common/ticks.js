// Axis ticks that read at a glance: byte steps of 1, 2, 4, 5, 8, 10, 16, 20, ... units
// (2^k or 5 × 2^k of GiB, MiB or KiB), never 9.91 GiB.

const KIB = 1024;
const MIB = KIB * 1024;
const GIB = MIB * 1024;

/** Candidate steps of `unit` bytes: 2^k and 5 × 2^k units for k ≥ 0, below `below` units. */
function stepsIn(unit, below) {
  const steps = [];
  for (let k = 0; 2 ** k < below; k++) {
    steps.push(2 ** k * unit);
    if (5 * 2 ** k < below) steps.push(5 * 2 ** k * unit);
  }
  return steps;
}

const CANDIDATES = [
  ...new Set([...stepsIn(1, 1024), ...stepsIn(KIB, 1024), ...stepsIn(MIB, 1024), ...stepsIn(GIB, 2 ** 30)]),
].sort((a, b) => a - b);

/** The smallest candidate step that puts at most `maxTicks` intervals on [min, max]. */
export function byteStep(min, max, maxTicks) {
  const span = Math.max(max - min, 1);
  for (const step of CANDIDATES) if (span / step <= Math.max(1, maxTicks)) return step;
  return CANDIDATES[CANDIDATES.length - 1];
}

/** Tick positions (bytes) on [min, max] at byteStep's step. */
export function byteTicks(min, max, maxTicks) {
  const step = byteStep(min, max, maxTicks);
  const ticks = [];
  for (let v = Math.ceil(min / step) * step; v <= max + step * 1e-9; v += step) ticks.push(v);
  return ticks;
}

/** A tick's label in the unit of its step: "16 GiB", "512 MiB", "2.5 GiB" never appears. */
export function byteTickLabel(value, step) {
  const unit = step >= GIB ? [GIB, 'GiB'] : step >= MIB ? [MIB, 'MiB'] : step >= KIB ? [KIB, 'KiB'] : [1, 'B'];
  if (value === 0) return '0';
  const n = value / unit[0];
  return `${Number.isInteger(n) ? n : n.toFixed(1)} ${unit[1]}`;
}
