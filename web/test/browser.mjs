// What every page test needs from a real browser: Debian's Chromium driven by playwright-core,
// every console message and page error kept, requests other than the page itself refused and
// counted, and checks that a page is laid out and drawn. Used by tests/*/..._page_test.mjs.
import { existsSync } from 'node:fs';
import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.FRAGSCOPE_CHROMIUM || '/usr/bin/chromium';

/** Exit status ctest reads as "skipped" (SKIP_RETURN_CODE). */
export const SKIPPED = 77;

/** Launches Chromium, or exits SKIPPED saying why when it is not installed. */
export async function launch() {
  if (!existsSync(CHROMIUM)) {
    console.log(`SKIPPED: ${CHROMIUM} is not installed (scripts/install-deps.sh installs Debian's chromium)`);
    process.exit(SKIPPED);
  }
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
}

/**
 * Opens `file` in a new page of `width` × `height` and waits for <html data-rendered="ok">.
 * Returns the page, the milliseconds from navigation to rendered, and the problems seen:
 * console errors and warnings, page errors, requests for anything but the file itself.
 */
export async function open(browser, file, { width = 1280, height = 900 } = {}) {
  const page = await browser.newPage({ viewport: { width, height } });
  const problems = [];
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  const url = `file://${file}`;
  await page.route('**/*', (route) => {
    if (route.request().url() === url) return route.continue();
    problems.push(`request: ${route.request().url()}`);
    return route.abort();
  });
  const start = Date.now();
  await page.goto(url);
  await page.waitForSelector('html[data-rendered="ok"]', { timeout: 20000 });
  return { page, loadMs: Date.now() - start, problems };
}

/** Boxes of elements that leave the viewport horizontally, or a page wider than it. */
export async function horizontalOverflow(page) {
  return page.evaluate(() => {
    const width = document.documentElement.clientWidth;
    const out = [];
    if (document.documentElement.scrollWidth > width)
      out.push(`page ${document.documentElement.scrollWidth}px wide > ${width}px`);
    for (const e of document.querySelectorAll('body *')) {
      const box = e.getBoundingClientRect();
      if (box.width === 0 || getComputedStyle(e).position === 'absolute') continue;
      if (box.left < -0.5 || box.right > width + 0.5)
        out.push(`${e.tagName.toLowerCase()}#${e.id}.${e.className}: ${box.left}–${box.right}`);
    }
    return out;
  });
}

/** Distinct colours among up to 20 000 pixels of a canvas (an element handle), sampled evenly. */
export function canvasColours(canvas) {
  return canvas.evaluate((c) => {
    const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    const step = Math.max(1, Math.floor((c.width * c.height) / 20000));
    const seen = new Set();
    for (let p = 0; p < c.width * c.height; p += step)
      seen.add((data[4 * p] << 24) | (data[4 * p + 1] << 16) | (data[4 * p + 2] << 8) | data[4 * p + 3]);
    return seen.size;
  });
}

/** Decodes a PNG in the browser and counts its distinct colours (a blank shot has one). */
export async function pngColours(browser, png) {
  const page = await browser.newPage();
  const colours = await page.evaluate(async (base64) => {
    const image = new Image();
    image.src = `data:image/png;base64,${base64}`;
    await image.decode();
    const canvas = Object.assign(document.createElement('canvas'), { width: image.width, height: image.height });
    const ctx = canvas.getContext('2d');
    ctx.drawImage(image, 0, 0);
    const data = ctx.getImageData(0, 0, image.width, image.height).data;
    const seen = new Set();
    for (let p = 0; p < data.length; p += 4 * 97) seen.add((data[p] << 16) | (data[p + 1] << 8) | data[p + 2]);
    return seen.size;
  }, png.toString('base64'));
  await page.close();
  return colours;
}

/** Drags across the plot of chart `name` from `from` to `to` (fractions of its width). */
export async function dragChart(page, name, from, to) {
  const box = await page.evaluate((n) => {
    window.fragscopeCharts[n].over.scrollIntoView({ block: 'center' });
    const r = window.fragscopeCharts[n].over.getBoundingClientRect();
    return { x: r.left, y: r.top, width: r.width, height: r.height };
  }, name);
  const y = box.y + box.height / 2;
  await page.mouse.move(box.x + box.width * from, y);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * ((from + to) / 2), y, { steps: 4 });
  await page.mouse.move(box.x + box.width * to, y, { steps: 4 });
  await page.mouse.up();
  return box;
}

/** The x scale of chart `name`. */
export function xScale(page, name) {
  return page.evaluate(
    (n) => ({ min: window.fragscopeCharts[n].scales.x.min, max: window.fragscopeCharts[n].scales.x.max }),
    name,
  );
}

/** Collects failures: check(condition, message) records the message when the condition fails. */
export function checker(prefix) {
  const failures = [];
  const check = (ok, message) => {
    if (!ok) failures.push(`${prefix()}: ${message}`);
    return ok;
  };
  return { check, failures };
}
