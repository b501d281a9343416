// The segments at the OOM as a parking lot: every segment one slot as long as its bytes,
// largest first, wrapped into lanes of equal bytes; the failed request drawn on the same
// scale above, and below, the free bytes by the size of their hole.
import { COLOURS, widthOf } from '../common/chart.js';
import { formatBytes } from '../common/format.js';
import { byteStep, byteTickLabel, byteTicks } from '../common/ticks.js';

const RUN_COLOUR = [COLOURS.allocated, COLOURS.pending, COLOURS.free];
const RUN_NAME = ['allocated', 'pending free', 'free'];
const LANE = 24;
const GAP = 7;
const LABEL = 64;

function element(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text != null) e.textContent = text;
  return e;
}

function canvasOf(width, height) {
  const canvas = element('canvas');
  canvas.width = Math.round(width * devicePixelRatio);
  canvas.height = Math.round(height * devicePixelRatio);
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const ctx = canvas.getContext('2d');
  ctx.scale(devicePixelRatio, devicePixelRatio);
  return { canvas, ctx };
}

/** Bytes per lane: a round figure giving 8 to 16 lanes. */
function laneBytes(reserved) {
  return byteStep(0, reserved / 12, 1);
}

function slotDescription(slot) {
  const lines = [];
  if (slot.count > 1) {
    const sizes = `${formatBytes(slot.smallest)} – ${formatBytes(slot.largest)}`;
    lines.push(`${slot.count} segments of ${sizes} (grouped: each too small to see)`);
  } else {
    lines.push(`segment ${slot.address}${slot.private ? ' (private pool)' : ''}: ${formatBytes(slot.size)}`);
  }
  lines.push(
    `allocated ${formatBytes(slot.size - slot.free - slot.pending)}, free ${formatBytes(slot.free)}` +
      (slot.pending ? `, pending free ${formatBytes(slot.pending)}` : ''),
  );
  lines.push(`largest free block ${formatBytes(slot.largest_free)}`);
  return lines;
}

/** Draws the lot into `container`; returns what the page states about it. */
export function drawSegmentLot(container, seg) {
  const width = widthOf(container);
  const perLane = laneBytes(seg.reserved_bytes);
  const laneWidth = width - LABEL - 8;
  const scale = laneWidth / perLane;
  const showRequest = seg.request_bytes != null;
  const requestLanes = showRequest ? Math.ceil(seg.request_bytes / perLane) : 0;
  const lanes = Math.ceil(seg.reserved_bytes / perLane);
  const top = showRequest ? requestLanes * (LANE + GAP) + 14 : 0;
  const height = top + lanes * (LANE + GAP) + 4;

  const summary = element('p', 'summary');
  summary.id = 'lot-summary';
  const largestBucket = seg.holes.length ? seg.holes[seg.holes.length - 1] : null;
  summary.textContent =
    `${formatBytes(seg.free_bytes)} free in ${seg.segments} segments (${formatBytes(seg.reserved_bytes)} reserved); ` +
    `the largest free block is ${formatBytes(seg.largest_free_bytes)}` +
    (showRequest ? `; the request that failed needed ${formatBytes(seg.request_bytes)} in one piece.` : '.');
  summary.dataset.freeBytes = String(seg.free_bytes);
  container.appendChild(summary);

  const { canvas, ctx } = canvasOf(width, height);
  canvas.id = 'segment-lot-canvas';
  canvas.setAttribute('role', 'img');
  canvas.setAttribute('aria-label', summary.textContent);
  const wrap = element('div', 'lot-wrap');
  wrap.appendChild(canvas);
  const tip = element('div', 'tooltip');
  wrap.appendChild(tip);
  container.appendChild(wrap);

  ctx.font = '11px system-ui, sans-serif';
  ctx.textBaseline = 'middle';
  const pieces = []; // hover: {x, y, w, h, slot, start}

  /** Fills bytes [from, to) of the lot (offset `origin` lanes down) in `colour`, lane by lane. */
  function fill(from, to, colour, laneTop, onPiece) {
    let at = from;
    while (at < to) {
      const lane = Math.floor(at / perLane);
      const laneEnd = (lane + 1) * perLane;
      const end = Math.min(to, laneEnd);
      const x = LABEL + (at - lane * perLane) * scale;
      const w = Math.max((end - at) * scale, 0.6);
      const y = laneTop + lane * (LANE + GAP);
      ctx.fillStyle = colour;
      ctx.fillRect(x, y, w, LANE);
      if (onPiece) onPiece(x, y, w);
      at = end;
    }
  }

  // The request, to scale, above the lot.
  if (showRequest) {
    ctx.fillStyle = COLOURS.oom;
    ctx.font = '600 11px system-ui, sans-serif';
    ctx.fillText('failed', 4, LANE / 2);
    ctx.fillText('request', 4, LANE / 2 + 12);
    fill(0, seg.request_bytes, COLOURS.oom, 0);
    ctx.fillStyle = '#fff';
    ctx.fillText(`${formatBytes(seg.request_bytes)} in one piece`, LABEL + 6, LANE / 2);
    ctx.font = '11px system-ui, sans-serif';
  }

  // Lane labels: the lot's bytes so far.
  ctx.fillStyle = COLOURS.muted;
  for (let lane = 0; lane < lanes; lane++)
    ctx.fillText(byteTickLabel(lane * perLane, perLane), 4, top + lane * (LANE + GAP) + LANE / 2);

  let start = 0;
  let hole = null;
  seg.slots.forEach((slot, index) => {
    const record = (x, y, w) => pieces.push({ x, y, w, h: LANE, index, start });
    if (slot.runs) {
      fill(start, start + slot.size, COLOURS.allocated, top, record);
      for (let r = 0; r < slot.runs.length; r += 3) {
        const [kind, offset, size] = [slot.runs[r], slot.runs[r + 1], slot.runs[r + 2]];
        if (kind !== 0) fill(start + offset, start + offset + size, RUN_COLOUR[kind], top);
        if (kind === 2 && !hole && size === seg.largest_free_bytes)
          hole = { from: start + offset, to: start + offset + size };
      }
    } else {
      // A group: its free share as a level from the bottom, hatched to say "many pieces".
      fill(start, start + slot.size, COLOURS.allocated, top, (x, y, w) => {
        record(x, y, w);
        const level = (LANE * (slot.free + slot.pending)) / slot.size;
        ctx.fillStyle = COLOURS.free;
        ctx.fillRect(x, y + LANE - level, w, level);
        ctx.strokeStyle = 'rgba(255,255,255,0.55)';
        ctx.lineWidth = 1;
        ctx.beginPath();
        for (let hx = x - LANE; hx < x + w; hx += 5) {
          ctx.moveTo(Math.max(hx, x), y + LANE - Math.max(0, x - hx));
          ctx.lineTo(Math.min(hx + LANE, x + w), y + Math.max(0, hx + LANE - x - w));
        }
        ctx.stroke();
      });
    }
    // The slot's end: a gap a reader sees between segments.
    fill(start + slot.size - Math.min(slot.size, 0.8 / scale), start + slot.size, '#fff', top);
    start += slot.size;
  });

  if (hole) {
    ctx.strokeStyle = '#0b5d2a';
    ctx.lineWidth = 2;
    const lane = Math.floor(hole.from / perLane);
    const x = LABEL + (hole.from - lane * perLane) * scale;
    const y = top + lane * (LANE + GAP);
    ctx.strokeRect(x - 1, y - 1, Math.max((hole.to - hole.from) * scale, 2) + 2, LANE + 2);
  }

  canvas.addEventListener('mousemove', (event) => {
    const box = canvas.getBoundingClientRect();
    const mx = event.clientX - box.left;
    const my = event.clientY - box.top;
    const piece = pieces.find((p) => mx >= p.x && mx <= p.x + p.w && my >= p.y && my <= p.y + p.h);
    if (!piece) {
      tip.style.display = 'none';
      return;
    }
    const slot = seg.slots[piece.index];
    const lines = slotDescription(slot);
    if (slot.runs) {
      const lane = Math.floor((my - top) / (LANE + GAP));
      const offset = lane * perLane + (mx - LABEL) / scale - piece.start;
      for (let r = 0; r < slot.runs.length; r += 3)
        if (offset >= slot.runs[r + 1] && offset < slot.runs[r + 1] + slot.runs[r + 2])
          lines.push(
            `here: ${RUN_NAME[slot.runs[r]]} ${formatBytes(slot.runs[r + 2])} at +${formatBytes(slot.runs[r + 1])}`,
          );
    }
    tip.textContent = lines.join('\n');
    tip.style.display = 'block';
    tip.style.left = `${Math.min(mx + 12, width - 320)}px`;
    tip.style.top = `${my + 14}px`;
  });
  canvas.addEventListener('mouseleave', () => {
    tip.style.display = 'none';
  });

  const legend = element('div', 'legend');
  for (const [name, colour] of [
    ['allocated', COLOURS.allocated],
    ['free (cached)', COLOURS.free],
    ['pending free', COLOURS.pending],
    ['failed request', COLOURS.oom],
    ['largest free block (outlined)', null],
  ]) {
    const item = element('span', 'legend-item');
    const swatch = element('span', 'swatch');
    if (colour) swatch.style.background = colour;
    else swatch.style.border = '2px solid #0b5d2a';
    item.append(swatch, name);
    legend.appendChild(item);
  }
  legend.appendChild(element('span', 'legend-item', `one lane = ${byteTickLabel(perLane, perLane)}`));
  container.appendChild(legend);

  drawHoles(container, seg, width);
  return { lanes, perLane };
}

/** Free bytes by hole size (power-of-two buckets), the request's bucket marked. */
function drawHoles(container, seg, width) {
  if (!seg.holes.length) return;
  const buckets = seg.holes.map((h) => ({ ...h }));
  const request = seg.request_bytes;
  while (request != null && buckets[buckets.length - 1].high <= request) {
    const last = buckets[buckets.length - 1];
    buckets.push({ low: last.high, high: last.high * 2, holes: 0, bytes: 0 });
  }
  const title = element(
    'p',
    'caption',
    'Free bytes by the size of the hole they are in' +
      (request != null ? ' — the request needed a hole in the red bucket:' : ':'),
  );
  container.appendChild(title);
  const height = 170;
  const { canvas, ctx } = canvasOf(width, height);
  canvas.id = 'hole-chart';
  container.appendChild(canvas);
  const left = 72;
  const bottom = height - 34;
  const plotHeight = bottom - 14;
  const max = Math.max(...buckets.map((b) => b.bytes), 1);
  const step = byteStep(0, max, 3);
  const top = Math.ceil(max / step) * step;
  const ticks = byteTicks(0, top, 3);
  const barSpace = (width - left - 8) / buckets.length;
  ctx.font = '11px system-ui, sans-serif';
  ctx.textBaseline = 'middle';
  for (const t of ticks) {
    const y = bottom - (plotHeight * t) / top;
    ctx.strokeStyle = COLOURS.grid;
    ctx.beginPath();
    ctx.moveTo(left, y);
    ctx.lineTo(width - 8, y);
    ctx.stroke();
    ctx.fillStyle = COLOURS.muted;
    ctx.fillText(byteTickLabel(t, step), 4, y);
  }
  const labelEvery = Math.ceil(56 / barSpace);
  buckets.forEach((b, i) => {
    const x = left + i * barSpace;
    const isRequest = request != null && request >= b.low && request < b.high;
    const h = (plotHeight * b.bytes) / top;
    ctx.fillStyle = COLOURS.free;
    ctx.fillRect(x + barSpace * 0.12, bottom - h, barSpace * 0.76, h);
    if (isRequest) {
      ctx.fillStyle = COLOURS.oom;
      ctx.fillRect(x + barSpace * 0.12, bottom - plotHeight, barSpace * 0.76, 4);
      ctx.fillRect(x + barSpace * 0.5 - 1, bottom - plotHeight, 2, plotHeight);
      ctx.font = '600 11px system-ui, sans-serif';
      const text = `request ${formatBytes(request)} · largest hole ${formatBytes(seg.largest_free_bytes)}`;
      const tw = ctx.measureText(text).width;
      const tx = Math.max(left, x + barSpace * 0.5 - tw - 8);
      const ty = bottom - plotHeight * 0.25;
      ctx.fillStyle = 'rgba(255,255,255,0.85)';
      ctx.fillRect(tx - 3, ty - 8, tw + 6, 16);
      ctx.fillStyle = COLOURS.oom;
      ctx.fillText(text, tx, ty);
      ctx.font = '11px system-ui, sans-serif';
    }
    if (i % labelEvery === 0 || isRequest) {
      ctx.fillStyle = isRequest ? COLOURS.oom : COLOURS.muted;
      const text = byteTickLabel(b.low, b.low);
      const tw = ctx.measureText(text).width;
      ctx.fillText(text, Math.min(x + barSpace / 2 - tw / 2, width - tw - 2), bottom + 12);
    }
  });
  ctx.fillStyle = COLOURS.muted;
  ctx.fillText('hole size (bucket from)', left, bottom + 26);
}
