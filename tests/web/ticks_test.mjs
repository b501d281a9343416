// Byte ticks a reader takes in at a glance: 2^k or 5 × 2^k of one unit, at most the asked count.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { byteStep, byteTickLabel, byteTicks } from '../../web/common/ticks.js';

const MIB = 2 ** 20;
const GIB = 2 ** 30;

test('the doctor report of issue 20: 0 to 39.63 GiB in 8 GiB steps, not 9.91 GiB', () => {
  const ticks = byteTicks(0, 39.63 * GIB, 6);
  assert.deepEqual(
    ticks.map((t) => byteTickLabel(t, byteStep(0, 39.63 * GIB, 6))),
    ['0', '8 GiB', '16 GiB', '24 GiB', '32 GiB'],
  );
});

test('every step is 2^k or 5 × 2^k of GiB, MiB, KiB or bytes, and the count stays within the limit', () => {
  for (const top of [1, 700, 3 * 1024, 200 * MIB, 700 * MIB, 1.5 * GIB, 52 * GIB, 139.8 * GIB, 1100 * GIB]) {
    for (const most of [2, 3, 5, 8]) {
      const step = byteStep(0, top, most);
      const unit = [GIB, MIB, 1024, 1].find((u) => step >= u);
      const units = step / unit;
      assert.ok(Number.isInteger(units), `${step} is a whole number of units`);
      const k = Math.log2(units % 5 === 0 ? units / 5 : units);
      assert.ok(Number.isInteger(k), `${units} is 2^k or 5 × 2^k`);
      assert.ok(top / step <= most, `${top}/${step} ≤ ${most}`);
      for (const t of byteTicks(0, top, most)) assert.match(byteTickLabel(t, step), /^(0|\d+ (GiB|MiB|KiB|B))$/);
    }
  }
});

test('a range that does not start at 0 starts at the first step inside it', () => {
  assert.deepEqual(
    byteTicks(30 * GIB, 40 * GIB, 5).map((t) => t / GIB),
    [30, 32, 34, 36, 38, 40],
  );
});
