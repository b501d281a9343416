// Figures on the page read as the text report writes them (src/util/bytes.cpp).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { formatBytes, formatPercent, formatSeconds } from '../../web/common/format.js';

test('bytes as format_bytes writes them', () => {
  assert.equal(formatBytes(0), '0 bytes');
  assert.equal(formatBytes(1023), '1023 bytes');
  assert.equal(formatBytes(1024), '1.00 KiB');
  assert.equal(formatBytes(41489384079), '38.64 GiB'); // frag_oom_104's reserved at the OOM
  assert.equal(formatBytes(1066532864), '1017.12 MiB');
  assert.equal(formatBytes(null), '–');
});

test('seconds with the decimals their span needs, percentages with one', () => {
  assert.equal(formatSeconds(12.3456, 0.5), '12.346 s');
  assert.equal(formatSeconds(12.3456, 36), '12.3 s');
  assert.equal(formatPercent(0.00815), '0.8%');
});
