// The bar on a large recorded snapshot (a long run with history on; it stays out of git:
// bench/view/record_long_run.py records one): the first picture within 10 s, every answer to a
// zoom or a hover within 100 ms, and the server's peak resident memory under twice the file's
// size. Skipped, saying why, when FRAGSCOPE_LARGE_SNAPSHOT names no file.
// Environment: FRAGSCOPE_BIN, FRAGSCOPE_LARGE_SNAPSHOT, FRAGSCOPE_CHROMIUM (default /usr/bin/chromium).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';

const SKIPPED = 77;
const snapshot = process.env.FRAGSCOPE_LARGE_SNAPSHOT;
const browserPath = process.env.FRAGSCOPE_CHROMIUM || '/usr/bin/chromium';
if (!snapshot || !existsSync(snapshot)) {
  console.log(`SKIPPED: no large snapshot (FRAGSCOPE_LARGE_SNAPSHOT=${snapshot || ''}); `
    + 'bench/view/record_long_run.py records one on a GPU');
  process.exit(SKIPPED);
}
if (!existsSync(browserPath)) {
  console.log(`SKIPPED: ${browserPath} is missing (scripts/install-deps.sh installs chromium)`);
  process.exit(SKIPPED);
}
const require = createRequire(new URL('../../web/package.json', import.meta.url));
const { chromium } = require('playwright-core');

const size = statSync(snapshot).size;
const start = Date.now();
const server = spawn(process.env.FRAGSCOPE_BIN, ['--quiet', 'view', snapshot, '--listen', '127.0.0.1:0'],
  { stdio: ['ignore', 'pipe', 'inherit'] });
const url = await new Promise((resolve, reject) => {
  let out = '';
  server.stdout.on('data', (chunk) => {
    out += chunk;
    const found = out.match(/serving (http:\/\/[^ ]+\/)/);
    if (found) resolve(found[1]);
  });
  server.on('exit', (code) => reject(new Error(`fragscope view exited with ${code}: ${out}`)));
});
const browser = await chromium.launch({ executablePath: browserPath, args: ['--no-sandbox', '--disable-gpu'] });
let failed = false;
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  await page.goto(url);
  await page.waitForSelector('html[data-rendered="ok"]', { timeout: 60000 });
  const firstPicture = (Date.now() - start) / 1000;
  await page.waitForFunction(() => document.getElementById('sites').dataset.from !== undefined, null,
    { timeout: 60000 });
  const settled = await page.evaluate(() => window.fragscopeTimings.length);

  // Zoom in ten notches at three places, hovering after each.
  const box = await page.locator('#timeline').boundingBox();
  for (const share of [0.2, 0.5, 0.8]) {
    await page.dblclick('#timeline');
    await page.waitForFunction(() => document.documentElement.dataset.viewFrom === '0');
    for (let i = 0; i < 10; i++) {
      const before = await page.locator('html').getAttribute('data-view-to');
      await page.mouse.move(box.x + box.width * share, box.y + box.height / 2);
      await page.mouse.wheel(0, -120);
      await page.waitForFunction((b) => document.documentElement.dataset.viewTo !== b, before);
      await page.mouse.move(box.x + box.width * share + 3, box.y + box.height * 0.8);
      await page.waitForTimeout(50);
    }
    await page.mouse.click(box.x + box.width * share, box.y + box.height * 0.5);
    await page.waitForTimeout(200);
  }
  const answers = (await page.evaluate(() => window.fragscopeTimings)).slice(settled);
  const slowest = Math.max(...answers.map((t) => t.ms));
  const peak = Number(readFileSync(`/proc/${server.pid}/status`, 'utf8').match(/VmHWM:\s+(\d+)/)[1]) * 1024;
  console.log(`${snapshot}: ${(size / 2 ** 20).toFixed(0)} MiB; first picture ${firstPicture.toFixed(1)} s; `
    + `${answers.length} answers to zoom, hover, clicks, slowest ${slowest.toFixed(1)} ms; `
    + `server peak RSS ${(peak / 2 ** 20).toFixed(0)} MiB (${(peak / size).toFixed(2)}x the file)`);
  assert.ok(firstPicture < 10, `first picture after ${firstPicture} s`);
  assert.deepEqual(answers.filter((t) => t.ms >= 100), [], 'answers of 100 ms or more');
  assert.ok(peak < 2 * size, `server peak RSS ${peak} bytes for a file of ${size}`);
  console.log('view large: all checks passed');
} catch (error) {
  failed = true;
  console.error(error);
} finally {
  await browser.close();
  server.kill('SIGINT');
}
process.exit(failed ? 1 : 0);
