// external_annotations as labelled ranges: START/END pairs of one name on one device (nested by name, unmatched
// starts run to the end of the trace). Drawn by the timelines in a strip above the plot.
import { colour } from './canvas.js';

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
