// The doctor's HTML page (src/report/doctor_html.cpp + web/report/) in headless Chromium, made by
// the built binary from recorded fixtures: it loads nothing, logs no error, states the key
// numbers of `doctor --json`, draws every panel the data holds inside the viewport, zooms and
// answers the pointer; the 110 MB trace (big/) loads in under 2 s as a page under 10 MB.
// Screenshots go to the output folder. Usage:
//   node doctor_html_page_test.mjs --fragscope BIN --fixtures DIR --out DIR [--only SCENARIO]
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

import { formatBytes } from '../../web/common/format.js';
import {
  canvasColours,
  checker,
  dragChart,
  horizontalOverflow,
  launch,
  open,
  pngColours,
  xScale,
} from '../../web/test/browser.mjs';

const { values: args } = parseArgs({
  options: {
    fragscope: { type: 'string' },
    fixtures: { type: 'string' },
    out: { type: 'string' },
    only: { type: 'string' },
  },
});
for (const key of ['fragscope', 'fixtures', 'out']) args[key] = resolve(args[key]);
mkdirSync(args.out, { recursive: true });

const MAX_PAGE_BYTES = 10 * 1024 * 1024;
const MAX_BIG_LOAD_MS = 2000;

/** The files a user has for fixture `scenario` (as tests/diagnose/doctor_fixture_files.h). */
function userFiles(dir, scenario) {
  const files = readdirSync(dir)
    .filter(
      (name) =>
        (name.startsWith('snapshot') && /\.pickle\.(zst|gz)$/.test(name)) ||
        name === 'steps.jsonl' ||
        name === 'stats.json' ||
        (name.startsWith('smi') && name.endsWith('.csv')) ||
        name === 'summary.txt',
    )
    .map((name) => join(dir, name));
  const meta = JSON.parse(readFileSync(join(dir, 'meta.json'), 'utf8'));
  if (typeof meta.oom_message === 'string') {
    const log = join(args.out, `${scenario}-train.log`);
    writeFileSync(log, `torch.OutOfMemoryError: ${meta.oom_message}\n`);
    files.push(log);
  }
  return files.sort();
}

/** Two ranks from two recordings: rank0 ran out of memory, rank1 (expandable segments) did not. */
function twoRanks() {
  const dir = join(args.out, 'two-ranks');
  rmSync(dir, { recursive: true, force: true });
  for (const [rank, scenario] of [
    ['rank0', 'frag_oom_104'],
    ['rank1', 'frag_expandable_104'],
  ]) {
    mkdirSync(join(dir, rank), { recursive: true });
    for (const name of ['snapshot.pickle.zst', 'steps.jsonl', 'stats.json'])
      symlinkSync(join(args.fixtures, scenario, name), join(dir, rank, name));
  }
  return [dir];
}

function doctor(inputs, extra) {
  const r = spawnSync(args.fragscope, ['doctor', ...inputs, '--threads', '2', ...extra], {
    encoding: 'utf8',
    maxBuffer: 1 << 28,
  });
  if (r.status !== 0 && r.status !== 1) throw new Error(`doctor exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

const SCENARIOS = [
  { name: 'frag_oom_104', zoom: true },
  { name: 'eval_spike' },
  { name: 'capacity_oom' },
  { name: 'input_bound' },
  { name: 'two_ranks', inputs: twoRanks, ranks: 2 },
  { name: 'big', zoom: true, maxLoadMs: MAX_BIG_LOAD_MS },
].filter((s) => !args.only || s.name === args.only);

const browser = await launch();
let current = '';
const { check, failures } = checker(() => current);

for (const scenario of SCENARIOS) {
  current = scenario.name;
  const inputs = scenario.inputs ? scenario.inputs() : userFiles(join(args.fixtures, scenario.name), scenario.name);
  const html = join(args.out, `${scenario.name}.html`);
  doctor(inputs, ['--html', html]);
  const json = JSON.parse(doctor(inputs, ['--json']));
  const pageBytes = statSync(html).size;
  check(pageBytes < MAX_PAGE_BYTES, `page is ${pageBytes} bytes, over ${MAX_PAGE_BYTES}`);

  const { page, loadMs, problems } = await open(browser, html);
  check(problems.length === 0, `problems: ${problems.join('; ')}`);
  if (scenario.maxLoadMs) check(loadMs < scenario.maxLoadMs, `loaded in ${loadMs} ms, over ${scenario.maxLoadMs} ms`);
  check((await page.$$('.page-error')).length === 0, 'an error is shown on the page');

  // The key numbers: what doctor --json says, as data and in words.
  const number = (id) =>
    page
      .$eval(`#${id}`, (e) => ({ value: e.dataset.value, text: e.querySelector('.value').textContent }))
      .catch(() => null);
  const expectBytes = async (id, bytes) => {
    const n = await number(id);
    if (!check(n !== null, `#${id} missing (expected ${bytes})`)) return;
    check(n.value === String(bytes), `#${id} data-value ${n.value} != ${bytes}`);
    check(n.text === formatBytes(bytes), `#${id} text "${n.text}" != "${formatBytes(bytes)}"`);
  };
  check((await page.$eval('#verdict', (e) => e.textContent)) === json.verdict, 'verdict differs from --json');
  if (json.oom) {
    if (json.oom.reserved_bytes != null) await expectBytes('n-reserved', json.oom.reserved_bytes);
    if (json.oom.allocated_bytes != null) await expectBytes('n-allocated', json.oom.allocated_bytes);
    await expectBytes('n-request', json.oom.request_bytes);
    if (json.oom.largest_free_block_bytes != null)
      await expectBytes('n-largest-hole', json.oom.largest_free_block_bytes);
  }
  if (json.capacity_bytes != null) await expectBytes('n-capacity', json.capacity_bytes);
  if (json.data_wait_fraction != null) {
    const n = await number('n-data-wait');
    check(
      n && Math.abs(Number(n.value) - json.data_wait_fraction) < 1e-4,
      `data wait ${n && n.value} != ${json.data_wait_fraction}`,
    );
  }

  // Every panel the data holds is drawn, inside the viewport.
  const expected = [];
  if (json.segment_map) {
    expected.push('segment-lot-canvas', 'hole-chart');
    await expectBytes('n-free-in-segments', json.segment_map.free_bytes);
    const summary = await page.$eval('#lot-summary', (e) => ({ free: e.dataset.freeBytes, text: e.textContent }));
    check(
      summary.free === String(json.segment_map.free_bytes),
      `lot summary free ${summary.free} != ${json.segment_map.free_bytes}`,
    );
    check(
      summary.text.includes(
        `${formatBytes(json.segment_map.free_bytes)} free in ${json.segment_map.segments} segments`,
      ),
      `lot summary "${summary.text}"`,
    );
  }
  const charts = await page.evaluate(() => Object.keys(window.fragscopeCharts));
  if (json.inputs_used.some((i) => i.startsWith('snapshot'))) check(charts.includes('memory-curve'), 'no memory curve');
  if (json.inputs_used.some((i) => i.startsWith('telemetry')))
    check(charts.includes('step-times'), 'no step-time chart');
  if (json.gpu_idle_fraction != null) check(charts.includes('smi-trace'), 'no nvidia-smi chart');
  if (scenario.ranks) {
    check(json.ranks.length === scenario.ranks, `--json has ${json.ranks.length} ranks`);
    check((await page.$$('.rank-cell canvas')).length >= scenario.ranks, 'a rank has no chart');
    check((await page.$$('.rank-cell.worst')).length === 1, 'not one worst rank outlined');
  }
  for (const name of charts) expected.push(`${name} canvas`);
  for (const selector of expected) {
    const [name, inChart] = selector.split(' ');
    const canvas = inChart
      ? await page.evaluateHandle((n) => window.fragscopeCharts[n].ctx.canvas, name)
      : await page.$(`#${name}`);
    const box = canvas && (await canvas.boundingBox());
    if (!check(box && box.width > 100 && box.height > 50, `${selector} is empty: ${JSON.stringify(box)}`)) continue;
    const colours = await canvasColours(canvas);
    check(colours >= 4, `${selector} is blank (${colours} colours)`);
  }
  const overflow = await horizontalOverflow(page);
  check(overflow.length === 0, `outside the viewport: ${overflow.slice(0, 5).join('; ')}`);

  // Readable byte ticks on the curve: 2^k or 5 × 2^k of one unit, never 9.91 GiB.
  if (charts.includes('memory-curve')) {
    const ticks = await page.evaluate(() => window.fragscopeCharts['memory-curve'].axes[1]._values);
    check(
      ticks && ticks.length >= 3 && ticks.every((t) => /^(0|\d+ (GiB|MiB|KiB|B))$/.test(t)),
      `y ticks ${JSON.stringify(ticks)}`,
    );
    const unit = ticks && ticks[1] && ticks[1].split(' ')[1];
    const steps = ticks
      ? ticks.slice(1).map((t, i) => Number(t.split(' ')[0]) - Number(i === 0 ? 0 : ticks[i].split(' ')[0]))
      : [];
    const isNice = (s) => [1, 2, 4, 5, 8, 10, 16, 20, 32, 40, 64, 80, 128, 160, 256, 320, 512, 640].includes(s);
    check(
      steps.every((s) => s === steps[0] && isNice(s)),
      `y tick step ${steps} ${unit}`,
    );
  }

  // Zoom: a drag across the middle of the curve narrows x to what was dragged over; a
  // double-click restores it. Hover fills the legend with bytes.
  if (scenario.zoom) {
    const before = await xScale(page, 'memory-curve');
    await dragChart(page, 'memory-curve', 0.3, 0.6);
    const after = await xScale(page, 'memory-curve');
    const span = before.max - before.min;
    check(
      after.max - after.min < 0.4 * span &&
        after.min > before.min + 0.25 * span &&
        after.max < before.max - 0.35 * span,
      `zoom ${JSON.stringify(before)} -> ${JSON.stringify(after)}`,
    );
    const box = await page.evaluate(() => {
      window.fragscopeCharts['memory-curve'].over.scrollIntoView({ block: 'center' });
      return window.fragscopeCharts['memory-curve'].over.getBoundingClientRect().toJSON();
    });
    await page.mouse.dblclick(box.x + box.width / 2, box.y + box.height / 2);
    const reset = await xScale(page, 'memory-curve');
    check(
      Math.abs(reset.min - before.min) < 1e-9 && Math.abs(reset.max - before.max) < 1e-9,
      `double-click left ${JSON.stringify(reset)}`,
    );
    await page.mouse.move(box.x + box.width * 0.5, box.y + box.height * 0.5);
    const legend = await page.$$eval('#memory-curve .u-legend .u-value', (cells) => cells.map((c) => c.textContent));
    check(
      legend.some((v) => / (GiB|MiB)$/.test(v)),
      `hover legend ${JSON.stringify(legend)}`,
    );
    if (json.segment_map) {
      const lot = await page.$('#segment-lot-canvas');
      await lot.scrollIntoViewIfNeeded();
      const lotBox = await lot.boundingBox();
      await page.mouse.move(lotBox.x + lotBox.width * 0.3, lotBox.y + lotBox.height - 12);
      const tip = await page.$eval('#segment-lot .tooltip', (e) => ({
        shown: getComputedStyle(e).display,
        text: e.textContent,
      }));
      check(tip.shown === 'block' && /segment/.test(tip.text), `lot tooltip ${JSON.stringify(tip)}`);
      await page.mouse.move(0, 0);
    }
  }

  const png = join(args.out, `${scenario.name}.png`);
  const shot = await page.screenshot({ path: png, fullPage: true });
  const colours = await pngColours(browser, shot);
  check(colours >= 16, `screenshot ${png} is blank (${colours} colours)`);
  console.log(`${scenario.name}: ${pageBytes} bytes, rendered in ${loadMs} ms, charts ${charts.join(' ')}; ${png}`);
  await page.close();
}
await browser.close();
for (const f of failures) console.log(`FAIL ${f}`);
console.log(failures.length ? `${failures.length} failure(s)` : `all ${SCENARIOS.length} pages pass`);
process.exit(failures.length ? 1 : 0);
