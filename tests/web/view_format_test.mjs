// The view page's words for numbers, stacks and colours (web/view/format.js).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { bytes, colourOf, count, frameLines, signedBytes, sinceStart } from '../../web/view/format.js';

test('sizes read as the reports write them, changes with their sign', () => {
  assert.equal(bytes(1066532864), '1017.12 MiB');
  assert.equal(signedBytes(1024), '+1.00 KiB');
  assert.equal(signedBytes(-2048), '-2.00 KiB');
  assert.equal(signedBytes(0), '0 bytes');
  assert.equal(count(7312049), '7,312,049');
});

test('times since the first event, in seconds; nothing without timestamps', () => {
  assert.equal(sinceStart(1796145447254900 + 1500000, 1796145447254900), '1.500 s');
  assert.equal(sinceStart(0, 1796145447254900), '');
});

test('an allocation keeps its colour and neighbours differ', () => {
  assert.equal(colourOf(12345), colourOf(12345));
  const colours = new Set([0, 1, 2, 3, 4, 5, 6, 7].map(colourOf));
  assert.ok(colours.size >= 4, `${colours.size} colours for 8 neighbours`);
  assert.match(colourOf(2437623), /^#[0-9a-f]{6}$/);
});

test('frames as file:line in name, innermost first; unknown lines as ?', () => {
  const frames = [{ file: 'model.py', line: 12, name: 'forward' }, { file: 'torch/x.py', line: null, name: 'f' }];
  assert.deepEqual(frameLines(frames), ['model.py:12 in forward', 'torch/x.py:? in f']);
  assert.deepEqual(frameLines([]), ['(no stack recorded)']);
});
