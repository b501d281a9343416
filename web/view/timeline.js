// The active-memory timeline: per pixel column the server's extremes, the largest allocations
// stacked in allocation order (memory_viz's picture), the rest as one grey band on top, the
// reserved bytes as a line, what-if curves dashed, OOMs in red. Wheel zooms around the pointer,
// a drag pans, a shift-drag selects a stretch, a click selects an event, and the pointer over an
// allocation asks for its stack. Only what the viewport shows is asked for.

import { getJson } from './api.js';
import { bytes, colourOf, count } from './format.js';

const PAD = { left: 70, right: 12, top: 10, bottom: 22 };
const OVERLAY_COLOURS = ['#222', '#8e44ad', '#16a085', '#d35400', '#2c3e50', '#c0392b'];

export class Timeline {
  /**
   * @param canvas the chart; @param snapshot one entry of /api/snapshots;
   * @param hooks {onView(from,to), onHover(info), onSelect(event), onRange(from,to), onDrawn()}
   */
  constructor(canvas, snapshot, hooks) {
    this.canvas = canvas;
    this.snapshot = snapshot;
    this.hooks = hooks;
    this.from = 0;
    this.to = snapshot.events - 1;
    this.data = null;
    this.overlays = new Map();  // config -> {columns, oom_event, colour}
    this.selected = null;
    this.marks = {};  // 'A' / 'B' -> event
    this.verdict = null;  // the doctor's, written beside the last OOM
    this.range = null;  // [from, to] selected with shift-drag
    this.request = null;
    this.drag = null;
    this.listening = new AbortController();
    this.bind();
  }

  /** Stops listening (another snapshot takes the chart) and drops any answer still coming. */
  destroy() {
    this.listening.abort();
    if (this.request) this.request.abort();
    this.request = null;
  }

  columns() {
    return Math.max(1, Math.floor(this.canvas.clientWidth - PAD.left - PAD.right));
  }

  /** Shows events [from, to]; asks the server for that viewport. */
  async setView(from, to) {
    const last = this.snapshot.events - 1;
    from = Math.max(0, Math.min(last, Math.round(from)));
    to = Math.max(from, Math.min(last, Math.round(to)));
    this.from = from;
    this.to = to;
    if (this.request) this.request.abort();
    const request = new AbortController();
    this.request = request;
    const params = { snapshot: this.snapshot.id, from, to, columns: this.columns(), bands: 400 };
    try {
      const { body } = await getJson('/api/timeline', params, request.signal);
      if (this.request !== request) return;
      this.data = body;
      this.draw();
      this.hooks.onView(from, to);
      await this.refreshOverlays(request);
    } catch (error) {
      if (error.name !== 'AbortError') throw error;
    }
  }

  /** Adds (or refreshes) the what-if curve of `config` ("ideal" or an allocator config). */
  async showOverlay(config) {
    if (!this.overlays.has(config)) {
      const colour = OVERLAY_COLOURS[this.overlays.size % OVERLAY_COLOURS.length];
      this.overlays.set(config, { columns: null, colour });
    }
    return this.fetchOverlay(config, undefined);
  }

  hideOverlay(config) {
    this.overlays.delete(config);
    this.draw();
  }

  async fetchOverlay(config, request) {
    const params = { snapshot: this.snapshot.id, config, from: this.from, to: this.to, columns: this.columns() };
    const { body } = await getJson('/api/whatif', params, request ? request.signal : undefined);
    const overlay = this.overlays.get(config);
    if (!overlay) return body;
    overlay.state = body;
    const fits = body.columns && body.columns.reserved_max.length === this.data.columns.first_event.length;
    overlay.columns = body.state === 'done' && fits ? body.columns : null;
    this.draw();
    return body;
  }

  async refreshOverlays(request) {
    for (const config of this.overlays.keys()) {
      if (this.request !== request) return;
      await this.fetchOverlay(config, request);
    }
  }

  zoom(factor, atX) {
    const span = this.to - this.from + 1;
    const at = this.eventAtX(atX);
    const newSpan = Math.max(8, Math.min(this.snapshot.events, Math.round(span * factor)));
    const share = span > 1 ? (at - this.from) / span : 0.5;
    const from = Math.round(at - share * newSpan);
    this.setView(from, from + newSpan - 1);
  }

  pan(columns) {
    const span = this.to - this.from + 1;
    const shift = Math.round((columns / this.columns()) * span);
    const from = Math.max(0, Math.min(this.snapshot.events - span, this.from - shift));
    this.setView(from, from + span - 1);
  }

  // Geometry ---------------------------------------------------------------------------------

  columnAtX(x) {
    if (!this.data) return -1;
    const n = this.data.columns.first_event.length;
    const c = Math.floor(((x - PAD.left) / this.columns()) * n);
    return c >= 0 && c < n ? c : -1;
  }

  eventAtX(x) {
    const c = this.columnAtX(Math.max(PAD.left, Math.min(x, PAD.left + this.columns() - 1)));
    return c < 0 ? this.from : this.data.columns.first_event[c];
  }

  xOfColumn(c) {
    return PAD.left + (c / this.data.columns.first_event.length) * this.columns();
  }

  xOfEvent(event) {
    const span = this.to - this.from + 1;
    return PAD.left + ((event - this.from + 0.5) / span) * this.columns();
  }

  yOf(value) {
    const height = this.canvas.clientHeight - PAD.top - PAD.bottom;
    return PAD.top + height - (value / this.yMax) * height;
  }

  valueAtY(y) {
    const height = this.canvas.clientHeight - PAD.top - PAD.bottom;
    return ((PAD.top + height - y) / height) * this.yMax;
  }

  /** The band's offset at column c (its offsets are steps). */
  static offsetAt(band, c) {
    const steps = band.offsets;
    let lo = 0;
    let hi = steps.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (steps[mid][0] <= c) lo = mid;
      else hi = mid - 1;
    }
    return steps[lo][1];
  }

  /** What lies under the pointer: {column, event, band?, summarized?, bytes}. */
  hit(x, y) {
    const c = this.columnAtX(x);
    if (c < 0) return null;
    const cols = this.data.columns;
    const value = this.valueAtY(y);
    const info = {
      column: c,
      firstEvent: cols.first_event[c],
      lastEvent: cols.last_event[c],
      peakEvent: cols.peak_event[c],
      activeMax: cols.active_max[c],
      reservedMax: cols.reserved_max[c],
      bytes: value,
    };
    for (const band of this.data.bands) {
      if (c < band.first_column || c > band.last_column) continue;
      const offset = Timeline.offsetAt(band, c);
      if (value >= offset && value < offset + band.size) {
        info.band = band;
        return info;
      }
    }
    if (value >= cols.drawn_bytes[c] && value < cols.active_max[c]) {
      info.summarized = cols.active_max[c] - cols.drawn_bytes[c];
    }
    return info;
  }

  // Drawing ----------------------------------------------------------------------------------

  draw() {
    if (!this.data) return;
    const started = performance.now();
    const canvas = this.canvas;
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth;
    const height = canvas.clientHeight;
    if (canvas.width !== Math.round(width * ratio)) canvas.width = Math.round(width * ratio);
    if (canvas.height !== Math.round(height * ratio)) canvas.height = Math.round(height * ratio);
    const g = canvas.getContext('2d');
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, width, height);
    const cols = this.data.columns;
    const n = cols.first_event.length;
    let yMax = 1;
    for (let c = 0; c < n; c++) yMax = Math.max(yMax, cols.reserved_max[c], cols.active_max[c]);
    for (const overlay of this.overlays.values()) {
      if (!overlay.columns) continue;
      for (const v of overlay.columns.reserved_max) if (v !== null) yMax = Math.max(yMax, v);
    }
    this.yMax = yMax * 1.04;
    const colWidth = this.columns() / n;

    // Allocations, bottom first; then the summarised rest up to the column's peak.
    for (const band of this.data.bands) {
      g.fillStyle = colourOf(band.allocation);
      const steps = band.offsets;
      for (let s = 0; s < steps.length; s++) {
        const first = steps[s][0];
        const last = s + 1 < steps.length ? steps[s + 1][0] - 1 : band.last_column;
        const top = this.yOf(steps[s][1] + band.size);
        const bottom = this.yOf(steps[s][1]);
        g.fillRect(this.xOfColumn(first), top, (last - first + 1) * colWidth + 0.5, Math.max(0.5, bottom - top));
      }
    }
    g.fillStyle = '#c8c8c8';
    for (let c = 0; c < n; c++) {
      if (cols.active_max[c] <= cols.drawn_bytes[c]) continue;
      const top = this.yOf(cols.active_max[c]);
      g.fillRect(this.xOfColumn(c), top, colWidth + 0.5, this.yOf(cols.drawn_bytes[c]) - top);
    }
    this.stepLine(g, cols.reserved_max, '#000', [], 1.5);
    for (const [config, overlay] of this.overlays) {
      if (overlay.columns) this.stepLine(g, overlay.columns.reserved_max, overlay.colour, [6, 4], 1.5);
      const oom = overlay.state && overlay.state.oom_event;
      if (oom !== null && oom !== undefined && oom >= this.from && oom <= this.to) {
        this.marker(g, oom, overlay.colour, `${config || 'defaults'} OOM`, [3, 3]);
      }
    }
    const lastOom = this.snapshot.oom_events[this.snapshot.oom_events.length - 1];
    for (const oom of this.data.oom_events) {
      this.marker(g, oom, '#d00', oom === lastOom && this.verdict ? `OOM: ${this.verdict}` : 'OOM', []);
    }
    for (const [name, event] of Object.entries(this.marks)) {
      if (event >= this.from && event <= this.to) this.marker(g, event, '#0a6', name, [2, 2]);
    }
    if (this.selected !== null && this.selected >= this.from && this.selected <= this.to) {
      this.marker(g, this.selected, '#06c', '', []);
    }
    if (this.range) {
      const x0 = this.xOfEvent(Math.max(this.from, this.range[0]));
      const x1 = this.xOfEvent(Math.min(this.to, this.range[1]));
      g.fillStyle = 'rgba(0, 102, 204, 0.12)';
      g.fillRect(Math.min(x0, x1), PAD.top, Math.abs(x1 - x0) + 1, height - PAD.top - PAD.bottom);
    }
    this.axes(g, width, height);
    document.documentElement.dataset.drawMs = (performance.now() - started).toFixed(1);
    this.hooks.onDrawn();
  }

  stepLine(g, values, colour, dash, lineWidth) {
    const n = values.length;
    const colWidth = this.columns() / n;
    g.strokeStyle = colour;
    g.lineWidth = lineWidth;
    g.setLineDash(dash);
    g.beginPath();
    let drawing = false;
    for (let c = 0; c < n; c++) {
      if (values[c] === null) {
        drawing = false;
        continue;
      }
      const y = this.yOf(values[c]);
      const x = this.xOfColumn(c);
      if (!drawing) g.moveTo(x, y);
      else g.lineTo(x, y);
      g.lineTo(x + colWidth, y);
      drawing = true;
    }
    g.stroke();
    g.setLineDash([]);
  }

  marker(g, event, colour, label, dash) {
    const x = this.xOfEvent(event);
    g.strokeStyle = colour;
    g.lineWidth = 1.5;
    g.setLineDash(dash);
    g.beginPath();
    g.moveTo(x, PAD.top);
    g.lineTo(x, this.canvas.clientHeight - PAD.bottom);
    g.stroke();
    g.setLineDash([]);
    if (label) {
      g.fillStyle = colour;
      g.font = '11px sans-serif';
      const width = g.measureText(label).width;
      const right = this.canvas.clientWidth - PAD.right;
      g.fillText(label, x + 3 + width > right ? x - 3 - width : x + 3, PAD.top + 11);
    }
  }

  axes(g, width, height) {
    g.fillStyle = '#333';
    g.strokeStyle = '#999';
    g.font = '11px sans-serif';
    g.lineWidth = 1;
    g.beginPath();
    g.moveTo(PAD.left, PAD.top);
    g.lineTo(PAD.left, height - PAD.bottom);
    g.lineTo(width - PAD.right, height - PAD.bottom);
    g.stroke();
    for (let i = 0; i <= 4; i++) {
      const value = (this.yMax / 1.04) * (i / 4);
      const y = this.yOf(value);
      g.fillText(bytes(Math.round(value)), 2, y + 4);
    }
    for (let i = 0; i <= 5; i++) {
      const event = Math.round(this.from + ((this.to - this.from) * i) / 5);
      const x = this.xOfEvent(event);
      const text = count(event);
      g.fillText(text, Math.min(width - PAD.right - g.measureText(text).width, Math.max(PAD.left, x - 20)),
        height - 6);
    }
  }

  // Pointer ----------------------------------------------------------------------------------

  bind() {
    const canvas = this.canvas;
    const options = { signal: this.listening.signal };
    canvas.addEventListener('wheel', (e) => {
      e.preventDefault();
      this.zoom(e.deltaY < 0 ? 0.7 : 1 / 0.7, e.offsetX);
    }, { passive: false, signal: this.listening.signal });
    canvas.addEventListener('mousedown', (e) => {
      this.drag = { x: e.offsetX, startX: e.offsetX, shift: e.shiftKey, moved: false };
    }, options);
    window.addEventListener('mouseup', (e) => {
      const drag = this.drag;
      this.drag = null;
      if (!drag || !this.data) return;
      if (!drag.moved) {
        const c = this.columnAtX(drag.startX);
        if (c >= 0) this.hooks.onSelect(this.data.columns.peak_event[c]);
      } else if (drag.shift) {
        const a = this.eventAtX(drag.startX);
        const b = this.eventAtX(e.clientX - canvas.getBoundingClientRect().left);
        this.range = [Math.min(a, b), Math.max(a, b)];
        this.draw();
        this.hooks.onRange(this.range[0], this.range[1]);
      }
    }, options);
    canvas.addEventListener('mousemove', (e) => {
      if (this.drag) {
        if (Math.abs(e.offsetX - this.drag.startX) > 3) this.drag.moved = true;
        if (this.drag.moved && !this.drag.shift) {
          this.pan(e.offsetX - this.drag.x);
          this.drag.x = e.offsetX;
        }
        return;
      }
      if (this.data) this.hooks.onHover(this.hit(e.offsetX, e.offsetY));
    }, options);
    canvas.addEventListener('dblclick', () => this.setView(0, this.snapshot.events - 1), options);
    window.addEventListener('resize', () => this.setView(this.from, this.to), options);
  }
}
