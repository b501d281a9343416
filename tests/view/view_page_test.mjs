// fragscope view in a real browser (Debian's Chromium, driven by playwright-core): the page of
// two recorded snapshots is zoomed, hovered, asked for the segments after an event, a diff
// and the sites, and what it shows is checked against `fragscope analyze --json` and
// `fragscope doctor --json` on the same files. The server answered every pointer request (zoom,
// hover, clicks) in < 100 ms of its own time; the first picture came within 10 s; the page asked
// nothing of any other origin.
// Environment: FRAGSCOPE_BIN, FRAGSCOPE_FIXTURES_DIR, FRAGSCOPE_CHROMIUM (default /usr/bin/chromium).
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';

const SKIPPED = 77;
const require = createRequire(new URL('../../web/package.json', import.meta.url));
const { chromium } = require('playwright-core');
const bin = process.env.FRAGSCOPE_BIN;
const fixtures = process.env.FRAGSCOPE_FIXTURES_DIR;
const browserPath = process.env.FRAGSCOPE_CHROMIUM || '/usr/bin/chromium';
const big = `${fixtures}/big/snapshot.pickle.zst`;
const oom = `${fixtures}/frag_oom_104/snapshot.pickle.zst`;
for (const [path, why] of [[browserPath, 'scripts/install-deps.sh installs chromium'], [big, 'the recorded fixtures'],
  [oom, 'the recorded fixtures']]) {
  if (!existsSync(path)) {
    console.log(`SKIPPED: ${path} is missing (${why})`);
    process.exit(SKIPPED);
  }
}

const json = (...args) => JSON.parse(execFileSync(bin, args, { encoding: 'utf8', maxBuffer: 1 << 28 }));
const analyzeBig = json('analyze', '--json', '--top', '50', big);
const analyzeOom = json('analyze', '--json', '--top', '50', oom);
let doctorOom;
try {
  doctorOom = json('doctor', '--json', oom);
} catch (error) {
  doctorOom = JSON.parse(error.stdout);  // exit 1: a finding
}

const server = spawn(bin, ['view', big, oom, '--listen', '127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'inherit'] });
const url = await new Promise((resolve, reject) => {
  let out = '';
  server.stdout.on('data', (chunk) => {
    out += chunk;
    const found = out.match(/serving (http:\/\/[^ ]+\/)/);
    if (found) resolve(found[1]);
  });
  server.on('exit', (code) => reject(new Error(`fragscope view exited with ${code}: ${out}`)));
  setTimeout(() => reject(new Error(`fragscope view did not start: ${out}`)), 60000);
});
const origin = new URL(url).origin;

const browser = await chromium.launch({ executablePath: browserPath, args: ['--no-sandbox', '--disable-gpu'] });
let failed = false;
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const problems = [];
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  await page.route('**/*', (route) => {
    if (route.request().url().startsWith(origin)) return route.continue();
    problems.push(`request: ${route.request().url()}`);
    return route.abort();
  });
  const html = page.locator('html');
  const attr = async (name) => html.getAttribute(name);
  const waitFor = (fn, arg) => page.waitForFunction(fn, arg, { timeout: 20000 });

  // First picture.
  const start = Date.now();
  await page.goto(url);
  await page.waitForSelector('html[data-rendered="ok"]', { timeout: 20000 });
  const firstPicture = Date.now() - start;
  console.log(`first picture: ${firstPicture} ms`);
  assert.ok(firstPicture < 10000, `first picture after ${firstPicture} ms`);
  const events = analyzeBig.trace_entries;
  assert.equal(await attr('data-view-from'), '0');
  assert.equal(await attr('data-view-to'), String(events - 1));

  // The page's own start (the first picture, the overview, the first event's segments, the
  // sites) is over once the segment map shows; what follows are the answers to the pointer.
  await waitFor(() => document.getElementById('segments-summary').dataset.event !== undefined);
  await waitFor(() => document.getElementById('sites').dataset.from !== undefined);
  const startAnswers = await page.evaluate(() => window.fragscopeTimings.length);

  // The segment map after the selected event, then after the last one: analyze's segments.
  await page.evaluate((e) => window.fragscopeView.selectEvent(e), events - 1);
  await waitFor((e) => document.getElementById('segments-summary').dataset.event === String(e), events - 1);
  const summary = await page.locator('#segments-summary').evaluate((e) => ({ ...e.dataset }));
  assert.equal(Number(summary.segments), analyzeBig.segments);
  assert.equal(Number(summary.freeBytes), analyzeBig.inactive_bytes);
  assert.equal(Number(summary.largestFree), analyzeBig.largest_free_block_bytes);

  // Hover the band covering most of the whole-run picture: a long-lived block whose site
  // analyze lists among the sites holding memory at the end.
  const largest = await page.evaluate(() => window.fragscopeView.largestBand());
  const point = await page.evaluate((id) => window.fragscopeView.bandPoint(id), largest);
  await page.mouse.move(point.x, point.y);
  await waitFor((id) => document.getElementById('details').dataset.allocation === String(id), largest);
  const details = await page.locator('#details').evaluate((e) => ({ ...e.dataset, text: e.textContent }));
  const sites = analyzeBig.top_sites.map((s) => s.location);
  assert.ok(sites.includes(details.site), `hovered site ${details.site} is not among analyze's ${sites}`);
  assert.match(details.text, /allocated (at event|before the trace)/);

  // Zoom in three notches around the middle: a narrower viewport, answered from the server.
  const box = await page.locator('#timeline').boundingBox();
  for (let i = 0; i < 3; i++) {
    const before = Number(await attr('data-view-to')) - Number(await attr('data-view-from'));
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await page.mouse.wheel(0, -120);
    await waitFor((span) => Number(document.documentElement.dataset.viewTo)
      - Number(document.documentElement.dataset.viewFrom) < span, before);
  }
  const span = Number(await attr('data-view-to')) - Number(await attr('data-view-from'));
  assert.ok(span < events * 0.5, `zoomed span ${span} of ${events}`);
  // Hovering the zoomed picture names an allocation or the column.
  await page.mouse.move(box.x + box.width * 0.6, box.y + box.height * 0.9);
  await waitFor(() => document.querySelector('#details h3') !== null);

  // The sites after the last event: analyze's largest site first.
  await page.evaluate((e) => window.fragscopeView.showSites(e, e), events - 1);
  await waitFor((e) => document.getElementById('sites').dataset.from === String(e), events - 1);
  const firstSite = await page.locator('#sites tr[data-location]').first().getAttribute('data-location');
  assert.equal(firstSite, analyzeBig.top_sites[0].location);

  // A diff: A after event 0, B at the peak; its change is the active bytes between them.
  const snapshots = await page.evaluate(() => fetch('/api/snapshots').then((r) => r.json()));
  const peak = snapshots.snapshots[0].peak_active_event;
  const atStart = await page.evaluate(() => fetch('/api/event?event=0').then((r) => r.json()));
  await page.evaluate(() => window.fragscopeView.selectEvent(0));
  await page.click('#mark-a-button');
  await page.evaluate((e) => window.fragscopeView.selectEvent(e), peak);
  await page.click('#mark-b-button');
  await waitFor(() => document.getElementById('diff').dataset.activeChange !== undefined);
  const change = Number(await page.locator('#diff').getAttribute('data-active-change'));
  assert.equal(change, snapshots.snapshots[0].peak_active_bytes - atStart.active_bytes);
  assert.ok(await page.locator('#diff-table tr.grew').count() > 0);

  // The second snapshot opens at its OOM, with the doctor's verdict; its segments there are
  // the doctor's picture of the OOM: reserved bytes, largest hole, free bytes (up to rounding).
  await page.selectOption('#snapshot', '1');
  const oomEvent = analyzeOom.oom_events[0].index;
  await waitFor((e) => document.getElementById('segments-summary').dataset.event === String(e), oomEvent);
  await waitFor(() => document.getElementById('doctor').dataset.verdict !== undefined);
  assert.equal(await page.locator('#doctor').getAttribute('data-verdict'), doctorOom.verdict);
  const atOom = await page.locator('#segments-summary').evaluate((e) => ({ ...e.dataset }));
  assert.equal(Number(atOom.reservedBytes), doctorOom.oom.reserved_bytes);
  assert.equal(Number(atOom.largestFree), doctorOom.oom.largest_free_block_bytes);
  assert.ok(Math.abs(Number(atOom.freeBytes) - doctorOom.oom.reserved_unallocated_bytes) < 1 << 20,
    `free ${atOom.freeBytes} against the doctor's ${doctorOom.oom.reserved_unallocated_bytes}`);

  // A diff across the two snapshots: A = the first's last event, B = the second's OOM; the
  // change is the difference of their active bytes.
  await page.selectOption('#snapshot', '0');
  await waitFor((e) => document.getElementById('segments-summary').dataset.event === String(e), peak);
  await page.evaluate((e) => window.fragscopeView.selectEvent(e), events - 1);
  await waitFor((e) => document.getElementById('segments-summary').dataset.event === String(e), events - 1);
  await page.click('#mark-a-button');
  await page.selectOption('#snapshot', '1');
  await waitFor((e) => document.getElementById('segments-summary').dataset.event === String(e), oomEvent);
  await page.click('#mark-b-button');
  const endOfFirst = await page.evaluate((e) => fetch(`/api/event?snapshot=0&event=${e}`).then((r) => r.json()),
    events - 1);
  const oomOfSecond = await page.evaluate((e) => fetch(`/api/event?snapshot=1&event=${e}`).then((r) => r.json()),
    oomEvent);
  await waitFor((c) => document.getElementById('diff').dataset.activeChange === String(c),
    oomOfSecond.active_bytes - endOfFirst.active_bytes);

  const all = await page.evaluate(() => window.fragscopeTimings);
  const slowest = (list, key = 'ms') => Math.max(...list.map((t) => t[key])).toFixed(1);
  const answers = all.slice(startAnswers);
  console.log(`start: ${startAnswers} answers, slowest ${slowest(all.slice(0, startAnswers))} ms; `
    + `then ${answers.length} answers to zoom, hover, clicks, slowest ${slowest(answers)} ms `
    + `(server ${slowest(answers, 'serverMs')} ms)`);
  // The server's own time is the bar (< 100 ms); the round trip also holds the browser's and the
  // machine's scheduling, which a shared CI runner can stretch, so it has only a loose bound here
  // (view_large, run alone, holds the round trip itself to 100 ms).
  assert.deepEqual(answers.filter((t) => !(t.serverMs < 100)), [], 'server answers of 100 ms or more');
  assert.deepEqual(answers.filter((t) => t.ms >= 1000), [], 'round trips of a second or more');
  assert.deepEqual(problems, []);
  console.log('view page: all checks passed');
} catch (error) {
  failed = true;
  console.error(error);
} finally {
  await browser.close();
  server.kill('SIGINT');
}
process.exit(failed ? 1 : 0);
