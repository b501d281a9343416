// fragscope view: the page. Everything it shows comes from this server's /api/ (nothing is
// loaded from anywhere else); docs/view.md explains each panel.

import './view.css';
import { getJson, timings } from './api.js';
import { bytes, count, el, frameLines, signedBytes, sinceStart } from './format.js';
import { SegmentMap } from './segments.js';
import { Timeline } from './timeline.js';

const root = document.documentElement;
const allocationCache = new Map();
let snapshots = [];
let current = null;  // entry of /api/snapshots
let timeline = null;
let segmentMap = null;
const marks = {};  // 'A' / 'B' -> {snapshot, event}

async function allocation(snapshot, id) {
  const key = `${snapshot}:${id}`;
  if (!allocationCache.has(key)) allocationCache.set(key, getJson('/api/allocation', { snapshot, id }));
  return (await allocationCache.get(key)).body;
}

function setDetails(title, lines, dataset = {}) {
  const details = document.getElementById('details');
  details.replaceChildren(el('h3', {}, title), el('pre', {}, lines.join('\n')));
  for (const [key, value] of Object.entries(dataset)) details.dataset[key] = String(value);
}

function describeAllocation(a) {
  const life = a.alloc_event === null ? 'allocated before the trace began'
    : `allocated at event ${count(a.alloc_event)}`;
  const end = a.free_completed_event === null ? 'alive at the end' : `freed at event ${count(a.free_completed_event)}`;
  const stackOf = { alloc: 'stack of the alloc', free: 'stack of the free (the alloc was not recorded)',
    block: 'stack of the end-state block' }[a.stack_of];
  return [`${bytes(a.size)} (${count(a.size)} bytes) at 0x${a.address.toString(16)}`, `${life}, ${end}`,
    `site: ${a.site}`, `${stackOf}:`, ...frameLines(a.frames).map((f) => `  ${f}`)];
}

// Hover ------------------------------------------------------------------------------------------

let hoverToken = 0;
async function hoverTimeline(info) {
  const token = ++hoverToken;
  if (!info) return;
  const where = info.firstEvent === info.lastEvent ? `event ${count(info.firstEvent)}`
    : `events ${count(info.firstEvent)}–${count(info.lastEvent)} (peak at ${count(info.peakEvent)})`;
  const head = `${where}: ${bytes(info.activeMax)} active, ${bytes(info.reservedMax)} reserved`;
  if (info.band) {
    root.dataset.hoverAllocation = String(info.band.allocation);
    const a = await allocation(current.id, info.band.allocation);
    if (token !== hoverToken) return;
    setDetails(`allocation ${count(a.allocation)}`, [head, ...describeAllocation(a)],
      { allocation: a.allocation, size: a.size, site: a.site });
  } else if (info.summarized) {
    setDetails('smaller allocations', [head, `${bytes(info.summarized)} in allocations too small to draw one by one `
      + 'at this zoom: zoom in to see them']);
  } else {
    setDetails('timeline', [head]);
  }
}

async function hoverSegments(info) {
  const s = info.segment;
  const head = `segment 0x${s.address.toString(16)}: ${bytes(s.size)}${s.expandable ? ' (expandable)' : ''}, `
    + `stream ${s.stream}, ${bytes(s.free_bytes)} free (largest hole ${bytes(s.largest_free)}), `
    + `${count(s.blocks.length)} live block${s.blocks.length === 1 ? '' : 's'} pin it`;
  if (info.allocation !== undefined) {
    const a = await allocation(current.id, info.allocation);
    setDetails(`block of allocation ${count(a.allocation)}${info.pending ? ' (freed, waiting on stream events)' : ''}`,
      [head, `takes ${bytes(info.blockSize)} of the segment`, ...describeAllocation(a)],
      { allocation: a.allocation, size: a.size, site: a.site });
  } else {
    setDetails('free run', [head, `${bytes(info.freeRun)} free here`], { freeRun: info.freeRun });
  }
}

// Selection, sites, diff -------------------------------------------------------------------------

async function selectEvent(event) {
  timeline.selected = event;
  timeline.draw();
  root.dataset.selectedEvent = String(event);
  const [{ body: e }] = await Promise.all([getJson('/api/event', { snapshot: current.id, event }),
    segmentMap.show(current.id, event)]);
  const lines = [`${e.action} ${e.address !== undefined ? `0x${e.address.toString(16)} ` : ''}${bytes(e.size)}`
    + `${e.device_free_bytes !== undefined ? `, the driver had ${bytes(e.device_free_bytes)} free` : ''}`,
  `after it: ${bytes(e.active_bytes)} active, ${bytes(e.reserved_bytes)} reserved`,
  `time: ${sinceStart(e.time_us, current.first_time_us)} after the first event; stream ${e.stream}`,
  ...(e.user_metadata ? [`annotation: ${e.user_metadata}`] : []), 'stack:',
  ...frameLines(e.frames).map((f) => `  ${f}`)];
  setDetails(`event ${count(event)}`, lines, { event, action: e.action });
}

async function showSites(from, to) {
  const { body } = await getJson('/api/sites', { snapshot: current.id, from, to, limit: 15 });
  const table = document.getElementById('sites');
  const caption = `events ${count(from)}–${count(to)}: ${count(body.sites)} sites; `
    + `peak ${bytes(body.peak_active_bytes)} active at event ${count(body.peak_event)}`;
  const rows = body.rows.map((r) => el('tr', { 'data-location': r.location, 'data-live-bytes': r.live_bytes },
    el('td', {}, r.location), el('td', { class: 'num' }, bytes(r.live_bytes)),
    el('td', { class: 'num' }, count(r.live_count)), el('td', { class: 'num' }, bytes(r.allocated_bytes)),
    el('td', { class: 'num' }, count(r.allocations))));
  table.replaceChildren(el('caption', {}, caption), el('tr', {}, el('th', {}, 'site'), el('th', {}, 'live at the peak'),
    el('th', {}, 'blocks'), el('th', {}, 'allocated in the stretch'), el('th', {}, 'allocations')), ...rows);
  table.dataset.from = String(from);
  table.dataset.to = String(to);
}

async function mark(name) {
  if (timeline.selected === null) return;
  marks[name] = { snapshot: current.id, event: timeline.selected };
  timeline.marks[name] = timeline.selected;
  timeline.draw();
  const label = document.getElementById(`mark-${name}`);
  label.textContent = `${name}: ${current.name} event ${count(timeline.selected)}`;
  if (marks.A && marks.B) await showDiff();
}

async function showDiff() {
  const params = { before: marks.A.snapshot, before_event: marks.A.event, after: marks.B.snapshot,
    after_event: marks.B.event, limit: 15 };
  const { body } = await getJson('/api/diff', params);
  const total = (t) => `${bytes(t.active_bytes)} active, ${bytes(t.reserved_bytes)} reserved, ${count(t.segments)} `
    + `segments, ${bytes(t.free_bytes)} free in them, ${count(t.live_allocations)} live blocks`;
  const rows = (list, kind) => list.map((c) => el('tr', { class: kind, 'data-location': c.location,
    'data-change-bytes': c.change_bytes }, el('td', {}, c.location), el('td', { class: 'num' }, bytes(c.before_bytes)),
  el('td', { class: 'num' }, bytes(c.after_bytes)), el('td', { class: 'num' }, signedBytes(c.change_bytes))));
  const head = el('tr', {}, el('th', {}, 'site'), el('th', {}, 'A'), el('th', {}, 'B'), el('th', {}, 'change'));
  const table = el('table', { id: 'diff-table' }, head, ...rows(body.grew, 'grew'), ...rows(body.shrank, 'shrank'));
  const diff = document.getElementById('diff');
  diff.replaceChildren(el('p', {}, `A: ${total(body.before)}`), el('p', {}, `B: ${total(body.after)}`),
    el('p', {}, `${count(body.changed_sites)} sites changed; grew first, then shrank:`), table);
  diff.dataset.activeChange = String(body.after.active_bytes - body.before.active_bytes);
}

// What-if and the doctor --------------------------------------------------------------------------

async function toggleOverlay(config, on, status) {
  if (!on) {
    timeline.hideOverlay(config);
    status.textContent = '';
    return;
  }
  for (;;) {
    const body = await timeline.showOverlay(config);
    if (body.state === 'pending') {
      status.textContent = 'replaying…';
      await new Promise((resolve) => setTimeout(resolve, 1000));
      if (!timeline.overlays.has(config)) return;
      continue;
    }
    status.textContent = body.state === 'failed' ? `failed: ${body.error}`
      : `peak ${bytes(body.peak_reserved_bytes)} reserved; ${body.oom_event === null ? 'no OOM'
        : `out of memory at event ${count(body.oom_event)}`}${body.capacity_bytes === null ? ' (no capacity known)'
        : ` at ${bytes(body.capacity_bytes)}`}`;
    status.dataset.state = body.state;
    return;
  }
}

function addOverlayControl(list, config, label) {
  const status = el('span', { class: 'status' });
  const box = el('input', { type: 'checkbox' });
  box.addEventListener('change', () => toggleOverlay(config, box.checked, status));
  list.append(el('li', { 'data-config': config }, el('label', {}, box, ` ${label} `), status));
  return box;
}

async function showDoctor() {
  const banner = document.getElementById('doctor');
  for (;;) {
    const { body } = await getJson('/api/doctor', { snapshot: current.id });
    if (body.state === 'running') {
      banner.textContent = 'the doctor is replaying the trace…';
      await new Promise((resolve) => setTimeout(resolve, 2000));
      continue;
    }
    if (body.state === 'failed') {
      banner.textContent = `the doctor could not decide: ${body.error}`;
      return;
    }
    const d = body.diagnosis;
    timeline.verdict = d.verdict;
    timeline.draw();
    banner.replaceChildren(el('strong', {}, `doctor: ${d.verdict}`), ` — ${d.headline}`);
    banner.dataset.verdict = d.verdict;
    return;
  }
}

// The page ---------------------------------------------------------------------------------------

function layout() {
  const app = document.getElementById('app');
  const picker = el('select', { id: 'snapshot' });
  snapshots.forEach((s) => picker.append(el('option', { value: s.id }, s.name)));
  picker.addEventListener('change', () => open(snapshots[Number(picker.value)]));
  const whatif = el('ul', { id: 'whatif' });
  const custom = el('input', { id: 'whatif-config', type: 'text',
    placeholder: 'max_split_size_mb:512,garbage_collection_threshold:0.8' });
  const add = el('button', { id: 'whatif-add' }, 'replay');
  add.addEventListener('click', () => {
    const box = addOverlayControl(whatif, custom.value.trim(), custom.value.trim() || 'PyTorch defaults');
    box.checked = true;
    box.dispatchEvent(new Event('change'));
  });
  const markA = el('button', { id: 'mark-a-button' }, 'selected event is A');
  const markB = el('button', { id: 'mark-b-button' }, 'selected event is B');
  markA.addEventListener('click', () => mark('A'));
  markB.addEventListener('click', () => mark('B'));
  app.replaceChildren(
    el('header', {}, el('h1', {}, 'fragscope view'), picker, el('span', { id: 'summary' })),
    el('div', { id: 'doctor' }),
    el('section', { id: 'timeline-panel' }, el('h2', {}, 'Active memory over time'),
      el('p', { class: 'help' }, 'wheel: zoom · drag: pan · shift-drag: sites of a stretch · '
        + 'click: the segments after that event · double-click: the whole run · ←/→: previous/next event'),
      el('canvas', { id: 'timeline' }), el('canvas', { id: 'overview' })),
    el('div', { class: 'columns' },
      el('section', { id: 'details-panel' }, el('h2', {}, 'Details'), el('div', { id: 'details' })),
      el('section', { id: 'whatif-panel' }, el('h2', {}, 'What-if (replayed at the capacity the trace shows)'), whatif,
        el('div', {}, custom, add))),
    el('section', { id: 'segments-panel' }, el('h2', {}, 'Segments after the selected event'),
      el('p', { id: 'segments-summary' }), el('canvas', { id: 'segments' })),
    el('div', { class: 'columns' },
      el('section', { id: 'sites-panel' }, el('h2', {}, 'Top allocation sites'), el('table', { id: 'sites' })),
      el('section', { id: 'diff-panel' }, el('h2', {}, 'Diff: what grew from A to B'),
        el('div', {}, markA, el('span', { id: 'mark-A' }), markB, el('span', { id: 'mark-B' })),
        el('div', { id: 'diff' }))));
  addOverlayControl(whatif, 'ideal', 'ideal packer (the floor)');
  addOverlayControl(whatif, 'expandable_segments:True', 'expandable_segments:True');
  addOverlayControl(whatif, '', 'PyTorch defaults');
  document.addEventListener('keydown', (e) => {
    if (!timeline || timeline.selected === null || e.target.tagName === 'INPUT') return;
    const step = { ArrowRight: 1, ArrowLeft: -1 }[e.key];
    if (step) {
      e.preventDefault();
      selectEvent(Math.max(0, Math.min(current.events - 1, timeline.selected + step)));
    }
  });
}

async function drawOverview(canvas) {
  const { body } = await getJson('/api/timeline', { snapshot: current.id, columns: Math.max(1, canvas.clientWidth),
    bands: 0 });
  const draw = () => {
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth;
    const height = canvas.clientHeight;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    const g = canvas.getContext('2d');
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    const cols = body.columns;
    const n = cols.active_max.length;
    const max = Math.max(1, ...cols.reserved_max, ...cols.active_max);
    g.fillStyle = '#4e79a7';
    for (let c = 0; c < n; c++) {
      const h = (cols.active_max[c] / max) * height;
      g.fillRect((c / n) * width, height - h, width / n + 0.5, h);
    }
    g.fillStyle = 'rgba(0,0,0,0.15)';
    const x0 = (timeline.from / current.events) * width;
    const x1 = ((timeline.to + 1) / current.events) * width;
    g.fillRect(x0, 0, Math.max(2, x1 - x0), height);
  };
  canvas.onmousedown = (e) => {
    const span = timeline.to - timeline.from + 1;
    const centre = Math.round((e.offsetX / canvas.clientWidth) * current.events);
    timeline.setView(centre - span / 2, centre + span / 2 - 1);
  };
  return draw;
}

async function open(snapshot) {
  if (timeline) timeline.destroy();
  if (segmentMap) segmentMap.destroy();
  for (const item of document.querySelectorAll('#whatif li')) {
    item.querySelector('input').checked = false;
    item.querySelector('.status').textContent = '';
  }
  current = snapshot;
  const s = snapshot;
  document.getElementById('summary').textContent = `${count(s.events)} events, ${count(s.allocations)} allocations, `
    + `peak ${bytes(s.peak_active_bytes)} active / ${bytes(s.peak_reserved_bytes)} reserved`
    + `${s.oom_events.length ? `, ${count(s.oom_events.length)} OOM${s.oom_events.length > 1 ? 's' : ''}` : ''}`;
  let redrawOverview = () => {};
  let first = root.dataset.rendered !== 'ok';
  timeline = new Timeline(document.getElementById('timeline'), s, {
    onView: (from, to) => {
      root.dataset.viewFrom = String(from);
      root.dataset.viewTo = String(to);
      redrawOverview();
    },
    onHover: hoverTimeline,
    onSelect: selectEvent,
    onRange: showSites,
    onDrawn: () => {
      if (!first) return;
      first = false;
      root.dataset.firstPictureMs = String(Math.round(performance.now()));
      root.dataset.rendered = 'ok';
    },
  });
  for (const [name, m] of Object.entries(marks)) if (m.snapshot === s.id) timeline.marks[name] = m.event;
  segmentMap = new SegmentMap(document.getElementById('segments'), document.getElementById('segments-summary'),
    { onHover: hoverSegments, onLoaded: () => {} });
  await timeline.setView(0, s.events - 1);
  redrawOverview = await drawOverview(document.getElementById('overview'));
  redrawOverview();
  const oom = s.oom_events.length ? s.oom_events[s.oom_events.length - 1] : null;
  await Promise.all([selectEvent(oom ?? s.peak_active_event), showSites(0, s.events - 1)]);
  if (oom !== null) await showDoctor();
}

async function start() {
  const { body } = await getJson('/api/snapshots');
  snapshots = body.snapshots;
  layout();
  await open(snapshots[0]);
}

/** Where the pointer must be to hover `allocation`'s band (client coordinates), or null. */
function bandPoint(allocation) {
  const band = timeline.data.bands.find((b) => b.allocation === allocation);
  if (!band) return null;
  const c = Math.floor((band.first_column + band.last_column) / 2);
  const box = timeline.canvas.getBoundingClientRect();
  const columnWidth = timeline.columns() / timeline.data.columns.first_event.length;
  return { x: box.left + timeline.xOfColumn(c) + columnWidth / 2,
    y: box.top + timeline.yOf(Timeline.offsetAt(band, c) + band.size / 2) };
}

/** The drawn allocation covering the most of the picture. */
function largestBand() {
  let best = null;
  for (const b of timeline.data.bands) {
    const area = b.size * (b.last_column - b.first_column + 1);
    if (!best || area > best.area) best = { area, allocation: b.allocation };
  }
  return best ? best.allocation : null;
}

// For the browser tests and the console: drive the page as the pointer would.
window.fragscopeView = {
  bandPoint,
  largestBand,
  setView: (from, to) => timeline.setView(from, to),
  selectEvent: (event) => selectEvent(event),
  mark: (name) => mark(name),
  open: (id) => open(snapshots[id]),
  showSites: (from, to) => showSites(from, to),
  timings,
};

start().catch((error) => {
  const p = el('p', { class: 'page-error' }, `error: ${error.message}`);
  document.getElementById('errors').append(p);
});
