// fragscope view against PyTorch's memory viewer (memory_viz), side by side on one snapshot, in
// headless Chromium: the seconds to the first picture, one wheel zoom, the peak memory of the
// server and of the browser. docs/PERFORMANCE.md keeps the rows this prints.
//   node bench/view/view_vs_memory_viz.mjs FRAGSCOPE_BIN MEMORY_VIZ_DIR SNAPSHOT.pickle [TIMEOUT_S]
// MEMORY_VIZ_DIR: made by bench/view/memory_viz_setup.sh. memory_viz reads only plain pickles
// (protocol 2-4), so SNAPSHOT is a plain .pickle; fragscope view reads the same file.
import { spawn, execFileSync } from 'node:child_process';
import { createReadStream, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { cpus, tmpdir } from 'node:os';
import { basename, join } from 'node:path';

const require = createRequire(new URL('../../web/package.json', import.meta.url));
const { chromium } = require('playwright-core');
const [bin, vizDir, snapshot, timeoutArg] = process.argv.slice(2);
if (!bin || !vizDir || !snapshot) {
  console.error('usage: view_vs_memory_viz.mjs FRAGSCOPE_BIN MEMORY_VIZ_DIR SNAPSHOT.pickle [TIMEOUT_S]');
  process.exit(2);
}
const timeoutMs = Number(timeoutArg || 600) * 1000;
const chromiumPath = process.env.FRAGSCOPE_CHROMIUM || '/usr/bin/chromium';

/** Proportional resident KiB (PSS: shared pages split between their processes) of the
 * processes whose command line holds `marker`, summed. */
function rssOf(marker) {
  let total = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker)) continue;
      const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
      total += Number(rollup.match(/Pss:\s+(\d+)/)[1]);
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

/** Samples rssOf(marker) every 200 ms; stop() returns the peak in MiB. */
function peakSampler(marker) {
  let peak = 0;
  const timer = setInterval(() => { peak = Math.max(peak, rssOf(marker)); }, 200);
  return () => {
    clearInterval(timer);
    return Math.round(Math.max(peak, rssOf(marker)) / 1024);
  };
}

async function browserWith(profile) {
  return chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath, headless: true, viewport: { width: 1400, height: 900 },
    args: ['--no-sandbox', '--disable-gpu'],
  });
}

/**
 * One wheel notch over `selector`'s middle: milliseconds, measured in the page, from the wheel
 * event to the first frame painted once the page has redrawn (memory_viz redraws in the event's
 * handler; fragscope view once its answer arrives, when data-view-to changes).
 */
async function wheelZoom(page, selector, waitsForAnswer) {
  const box = await page.locator(selector).first().boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.evaluate((answer) => {
    window.zoomMs = new Promise((resolve) => {
      window.addEventListener('wheel', () => {
        const start = performance.now();
        const done = () => resolve(performance.now() - start);
        const painted = () => requestAnimationFrame(() => requestAnimationFrame(done));
        if (!answer) {
          painted();
          return;
        }
        new MutationObserver((changes, observer) => {
          observer.disconnect();
          painted();
        }).observe(document.documentElement, { attributes: true, attributeFilter: ['data-view-to'] });
      }, { capture: true, once: true });
    });
  }, waitsForAnswer);
  await page.mouse.wheel(0, -120);
  return Math.round(await page.evaluate(() => window.zoomMs));
}

async function runMemoryViz() {
  const name = basename(snapshot);
  const server = createServer((request, response) => {
    const path = decodeURIComponent(new URL(request.url, 'http://x').pathname.slice(1)) || 'index.html';
    const file = path === name ? snapshot : join(vizDir, path);
    if (!existsSync(file) || statSync(file).isDirectory()) {
      response.writeHead(404).end();
      return;
    }
    const types = { js: 'text/javascript', html: 'text/html' };
    const type = types[file.split('.').pop()] || 'application/octet-stream';
    response.writeHead(200, { 'Content-Type': type, 'Content-Length': statSync(file).size });
    createReadStream(file).pipe(response);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const profile = mkdtempSync(join(tmpdir(), 'memory-viz-profile-'));
  const stop = peakSampler(profile);
  const context = await browserWith(profile);
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('crash', () => errors.push('the page crashed'));
  const start = Date.now();
  let outcome = 'ok';
  let firstPicture = null;
  let zoom = null;
  try {
    await page.goto(`http://127.0.0.1:${server.address().port}/index.html?file=${encodeURIComponent(name)}`);
    await Promise.race([
      page.waitForFunction(() => document.querySelectorAll('svg polygon').length > 0, null,
        { timeout: timeoutMs, polling: 500 }),
      new Promise((_, reject) => {
        const poll = setInterval(() => {
          if (errors.length) {
            clearInterval(poll);
            reject(new Error(errors.join('; ')));
          }
        }, 200);
      }),
    ]);
    firstPicture = (Date.now() - start) / 1000;
    zoom = await wheelZoom(page, 'svg', false);
  } catch (error) {
    outcome = errors.length ? errors.join('; ')
      : `no picture within ${timeoutMs / 1000} s (${error.message.split('\n')[0]})`;
  }
  const browserMiB = stop();
  await context.close().catch(() => {});
  server.close();
  rmSync(profile, { recursive: true, force: true });
  return { tool: 'memory_viz', firstPicture, zoom, serverMiB: null, browserMiB, outcome };
}

async function runFragscope() {
  const start = Date.now();
  const view = spawn(bin, ['--quiet', 'view', snapshot, '--listen', '127.0.0.1:0'],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise((resolve, reject) => {
    let out = '';
    view.stdout.on('data', (chunk) => {
      out += chunk;
      const found = out.match(/serving (http:\/\/[^ ]+\/)/);
      if (found) resolve(found[1]);
    });
    view.on('exit', (code) => reject(new Error(`fragscope view exited with ${code}`)));
  });
  const profile = mkdtempSync(join(tmpdir(), 'fragscope-view-profile-'));
  const stopBrowser = peakSampler(profile);
  const context = await browserWith(profile);
  const page = await context.newPage();
  await page.goto(url);
  await page.waitForSelector('html[data-rendered="ok"]', { timeout: timeoutMs });
  const firstPicture = (Date.now() - start) / 1000;
  const zoom = await wheelZoom(page, '#timeline', true);
  const browserMiB = stopBrowser();
  const status = readFileSync(`/proc/${view.pid}/status`, 'utf8');
  const serverMiB = Math.round(Number(status.match(/VmHWM:\s+(\d+)/)[1]) / 1024);
  await context.close();
  view.kill('SIGINT');
  rmSync(profile, { recursive: true, force: true });
  return { tool: 'fragscope view', firstPicture, zoom, serverMiB, browserMiB, outcome: 'ok' };
}

const size = statSync(snapshot).size;
const machine = `${cpus().length}-core ${cpus()[0].model.replace(/\s+/g, ' ').trim()}`;
const revision = execFileSync(bin, ['--version'], { encoding: 'utf8' }).trim();
console.error(`fragscope view on ${snapshot}…`);
const ours = await runFragscope();
console.error(`memory_viz on ${snapshot}…`);
const rows = [ours, await runMemoryViz()];
console.log(`${basename(snapshot)}: ${(size / 2 ** 20).toFixed(0)} MiB; ${machine}; ${revision}`);
console.log('| tool | first picture | one wheel zoom | server peak RSS | browser peak PSS | outcome |');
console.log('| --- | ---: | ---: | ---: | ---: | --- |');
for (const r of rows) {
  console.log(`| ${r.tool} | ${r.firstPicture === null ? '–' : `${r.firstPicture.toFixed(1)} s`} | `
    + `${r.zoom === null ? '–' : `${r.zoom} ms`} | ${r.serverMiB === null ? '–' : `${r.serverMiB} MiB`} | `
    + `${r.browserMiB} MiB | ${r.outcome} |`);
}
