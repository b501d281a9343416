// The segment map after one event: the "parking lot". Segments in address order, packed into
// rows; each block coloured as in the timeline (pending frees red), the free bytes white. The
// pointer over a block shows its allocation, over a free run its size, and which blocks pin the
// segment (a segment with any block alive cannot be given back to the driver).

import { getJson } from './api.js';
import { bytes, colourOf, count } from './format.js';

const ROW_HEIGHT = 14;
const ROW_GAP = 4;
const SEGMENT_GAP = 3;

export class SegmentMap {
  /** @param hooks {onHover(info), onLoaded(body)} */
  constructor(canvas, summary, hooks) {
    this.canvas = canvas;
    this.summary = summary;
    this.hooks = hooks;
    this.body = null;
    this.layout = [];
    this.request = null;
    this.listening = new AbortController();
    canvas.addEventListener('mousemove', (e) => this.hover(e.offsetX, e.offsetY), { signal: this.listening.signal });
  }

  /** Stops listening (another snapshot takes the map) and drops any answer still coming. */
  destroy() {
    this.listening.abort();
    if (this.request) this.request.abort();
    this.request = null;
  }

  async show(snapshot, event) {
    if (this.request) this.request.abort();
    const request = new AbortController();
    this.request = request;
    try {
      const { body } = await getJson('/api/segments', { snapshot, event }, request.signal);
      if (this.request !== request) return;
      this.body = body;
      this.draw();
      this.hooks.onLoaded(body);
    } catch (error) {
      if (error.name !== 'AbortError') throw error;
    }
  }

  draw() {
    const segments = this.body.segments;
    const width = this.canvas.clientWidth;
    let largest = 1;
    let total = 0;
    let free = 0;
    let largestFree = 0;
    let pinned = 0;
    for (const s of segments) {
      largest = Math.max(largest, s.size);
      total += s.size;
      free += s.free_bytes;
      largestFree = Math.max(largestFree, s.largest_free);
      if (s.blocks.length > 0) pinned += 1;
    }
    // Rows of at least the largest segment, at most ~40 rows for the whole map.
    const rowBytes = Math.max(largest, total / 40);
    const scale = (width - 2) / rowBytes;
    this.layout = [];
    let x = 1;
    let row = 0;
    for (const s of segments) {
      const w = Math.max(2, s.size * scale);
      if (x + w > width - 1 && x > 1) {
        row += 1;
        x = 1;
      }
      this.layout.push({ segment: s, x, y: row * (ROW_HEIGHT + ROW_GAP), w });
      x += w + SEGMENT_GAP;
    }
    const height = (row + 1) * (ROW_HEIGHT + ROW_GAP);
    const ratio = window.devicePixelRatio || 1;
    this.canvas.style.height = `${height}px`;
    this.canvas.width = Math.round(width * ratio);
    this.canvas.height = Math.round(height * ratio);
    const g = this.canvas.getContext('2d');
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, width, height);
    for (const { segment, x: sx, y, w } of this.layout) {
      g.fillStyle = '#fff';
      g.fillRect(sx, y, w, ROW_HEIGHT);
      const k = w / segment.size;
      for (const [allocation, offset, size, , pending] of segment.blocks) {
        g.fillStyle = pending ? '#d00' : colourOf(allocation);
        g.fillRect(sx + offset * k, y, Math.max(0.5, size * k), ROW_HEIGHT);
      }
      g.strokeStyle = segment.expandable ? '#06c' : '#333';
      g.lineWidth = 1;
      g.strokeRect(sx + 0.5, y + 0.5, w - 1, ROW_HEIGHT - 1);
    }
    this.summary.textContent = `after event ${count(this.body.event)}: ${count(segments.length)} segments, `
      + `${bytes(this.body.reserved_bytes)} reserved, ${bytes(this.body.active_bytes)} active, `
      + `${bytes(free)} free in segments (largest hole ${bytes(largestFree)}), `
      + `${count(pinned)} segments pinned by live blocks`;
    this.summary.dataset.segments = String(segments.length);
    this.summary.dataset.freeBytes = String(free);
    this.summary.dataset.largestFree = String(largestFree);
    this.summary.dataset.event = String(this.body.event);
    this.summary.dataset.reservedBytes = String(this.body.reserved_bytes);
  }

  hover(px, py) {
    for (const { segment, x, y, w } of this.layout) {
      if (px < x || px > x + w || py < y || py > y + ROW_HEIGHT) continue;
      const offset = ((px - x) / w) * segment.size;
      const block = segment.blocks.find(([, o, size]) => offset >= o && offset < o + size);
      const info = { segment, offset };
      if (block) {
        info.allocation = block[0];
        info.blockSize = block[2];
        info.requested = block[3];
        info.pending = block[4] === 1;
      } else {
        // The free run under the pointer: from the block before to the block after.
        let start = 0;
        let end = segment.size;
        for (const [, o, size] of segment.blocks) {
          if (o + size <= offset) start = Math.max(start, o + size);
          if (o > offset) end = Math.min(end, o);
        }
        info.freeRun = end - start;
      }
      this.hooks.onHover(info);
      return;
    }
  }
}
