// external_annotations as labelled ranges: START/END pairs of one name on one device (nested by name, unmatched
// starts run to the end of the trace). Drawn by the timelines (the Active Memory Timeline, the Diff view's two) in a
// strip above the plot.
import { colour } from './canvas.js';
import { el, micros } from './format.js';

export function ranges(annotations, device) {
  const open = new Map();
  const out = [];
  for (const a of annotations) {
    if (a.device !== device) continue;
    if (a.start) {
      if (!open.has(a.name)) open.set(a.name, []);
      open.get(a.name).push(a.time_us);
    } else {
      const s = open.get(a.name);
      if (s && s.length) out.push({ name: a.name, t0: s.pop(), t1: a.time_us });
    }
  }
  for (const [name, starts] of open) for (const t0 of starts) out.push({ name, t0, t1: Infinity });
  out.sort((a, b) => a.t0 - b.t0);
  return out;
}

// Assigns lanes so overlapping ranges do not hide each other.
export function lanes(rs) {
  const ends = [];
  for (const r of rs) {
    let lane = ends.findIndex((e) => e <= r.t0);
    if (lane < 0) { lane = ends.length; ends.push(0); }
    ends[lane] = r.t1;
    r.lane = lane;
  }
  return ends.length;
}

// Draws ranges given in axis units ({x0, x1, name, lane}) into [left, left+width] × [top, top+height].
export function drawStrip(g, rs, toX, left, width, top, laneH, th) {
  g.save();
  g.beginPath();
  g.rect(left, top, width, 1e4);
  g.clip();
  g.font = '11px system-ui, sans-serif';
  g.textBaseline = 'middle';
  for (const r of rs) {
    let a = left + toX(r.x0), b = left + toX(Math.min(r.x1, 1e300));
    if (b < left || a > left + width) continue;
    a = Math.max(a, left - 1);
    b = Math.min(b, left + width + 1);
    const y = top + r.lane * laneH;
    const key = [...r.name].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7);
    g.fillStyle = colour(key, th.dark, 0.55);
    g.fillRect(a, y, Math.max(1, b - a), laneH - 2);
    if (b - a > 24) {
      g.save();
      g.beginPath();
      g.rect(a, y, b - a - 2, laneH);
      g.clip();
      g.fillStyle = th.fg;
      g.fillText(r.name, a + 3, y + laneH / 2 - 1);
      g.restore();
    }
  }
  g.restore();
}

// One timeline's strip: its ranges in at most `maxLanes` lanes, their event indices once the core has mapped the
// times (the event axis), drawing and hit-testing on either axis. Axis values are the trace's own (time in µs, event
// index); a view whose axis is shifted (the Diff view's time since the first event) shifts them in `toX` and `at`.
export class Strip {
  constructor(annotations, device, maxLanes = 4) {
    const rs = ranges(annotations, device);
    this.lanes = Math.min(maxLanes, lanes(rs));
    this.ranges = rs.filter((r) => r.lane < maxLanes);
    this.steps = null;  // [[first, last]] event indices per range, once mapped
  }

  // Asks the core (`call`) for the events before each range's ends; resolves once they are known.
  async mapSteps(call, id, device, timeLast) {
    if (!this.ranges.length) return;
    const times = [];
    for (const r of this.ranges) times.push(r.t0, Number.isFinite(r.t1) ? r.t1 : timeLast + 1);
    const { body } = await call({ method: 'axis', id, device, times });
    this.steps = this.ranges.map((_, i) => [body.steps[2 * i], body.steps[2 * i + 1]]);
  }

  // Range i on the time axis (µs) or the event axis; null while its events are not mapped yet.
  extent(i, timeAxis) {
    const r = this.ranges[i];
    if (timeAxis) return [r.t0, r.t1];
    return this.steps ? this.steps[i] : null;
  }

  // Draws the lanes into [left, left + width] from `top`; toX maps an axis value to px from `left`.
  draw(g, timeAxis, toX, left, width, top, laneH, th) {
    if (!this.lanes) return;
    const rs = [];
    this.ranges.forEach((r, i) => {
      const e = this.extent(i, timeAxis);
      if (e) rs.push({ name: r.name, lane: r.lane, x0: e[0], x1: e[1] });
    });
    drawStrip(g, rs, toX, left, width, top, laneH, th);
  }

  // The index of the range in `lane` that covers axis value v, or -1.
  at(lane, v, timeAxis) {
    return this.ranges.findIndex((r, i) => {
      const e = r.lane === lane && this.extent(i, timeAxis);
      return e && e[0] <= v && v <= e[1];
    });
  }

  // The detail card of range i (times relative to the trace's first event, `timeFirst`). Names are text only.
  card(i, timeFirst) {
    const a = this.ranges[i];
    return el('div', null, el('h4', { text: a.name }), el('div', { class: 'fine', text:
      `external annotation · +${micros(a.t0 - timeFirst)}` +
      (Number.isFinite(a.t1) ? ` – +${micros(a.t1 - timeFirst)} (${micros(a.t1 - a.t0)})` : ' – end') }));
  }
}
