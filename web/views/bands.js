// Canvas drawing of one timeline_draw answer (the core's rectangles for a window and pixel grid), shared by the Active
// Memory Timeline and the Diff view's two linked timelines: y grid, bands, x axis, plot frame.
import { bytes } from '../format.js';
import { colour, ticks, byteTicks } from '../canvas.js';
import { categoryColour } from './widgets.js';

// Category order of the core's enum (categories.h).
export const CATEGORIES = ['parameter', 'gradient', 'optimizer_state', 'activation', 'temporary', 'unknown'];

// Horizontal byte grid with labels left of the plot; the plot's bottom is at B, its top at T.
export function drawYGrid(g, th, L, T, W, B, bpp) {
  g.font = '11px system-ui, sans-serif';
  g.fillStyle = th.muted;
  g.strokeStyle = th.grid;
  g.textAlign = 'right';
  g.textBaseline = 'middle';
  for (const t of byteTicks(bpp * (B - T), 5)) {
    const y = B - t / bpp;
    if (y < T - 1) continue;
    g.beginPath(); g.moveTo(L, Math.round(y) + 0.5); g.lineTo(L + W, Math.round(y) + 0.5); g.stroke();
    g.fillText(bytes(t), L - 6, y);
  }
}

// The rectangles of `blobs` (x0, x1, y0, y1, row, count, optional marked/category) with the plot's left edge at L
// and their baseline at B. opts: mask (Uint8Array over rows: search hits stay bright).
export function drawBands(g, th, blobs, L, B, opts) {
  const { x0, x1, y0, y1, row, count: cnt, marked, category: cats } = blobs;
  const hl = (opts && opts.mask) || null;
  for (let i = 0; i < row.length; ++i) {
    const r = row[i];
    const dim = hl ? (marked ? !marked[i] : !hl[r]) : false;
    g.fillStyle = cats ? categoryColour(CATEGORIES[cats[i]] || 'unknown')
      : cnt[i] > 1 ? (th.dark ? `hsl(220 8% ${dim ? 22 : 42}%)` : `hsl(220 8% ${dim ? 88 : 70}%)`)
      : colour(r, th.dark, dim ? 0.18 : 1);
    if (cats && dim) g.globalAlpha = 0.2;
    g.fillRect(L + x0[i], B - y1[i], x1[i] - x0[i], y1[i] - y0[i]);
    g.globalAlpha = 1;
  }
}

// Outlines every rectangle of the given rows: pairs [[row, css colour]] (hovered, pinned; -1 = none).
export function outlineRows(g, blobs, L, B, pairs) {
  const { x0, x1, y0, y1, row } = blobs;
  for (const [target, stroke] of pairs) {
    if (target < 0) continue;
    g.strokeStyle = stroke;
    g.lineWidth = 1.5;
    for (let i = 0; i < row.length; ++i)
      if (row[i] === target) g.strokeRect(L + x0[i] + 0.5, B - y1[i] + 0.5, Math.max(1, x1[i] - x0[i] - 1), Math.max(1, y1[i] - y0[i] - 1));
    g.lineWidth = 1;
  }
}

// Ticks under the plot for the window [a, b] (label(v) formats one), the axis name at the left, and the plot frame.
export function drawXAxis(g, th, L, T, W, B, a, b, label, name) {
  g.fillStyle = th.muted;
  g.font = '11px system-ui, sans-serif';
  g.textAlign = 'center';
  g.textBaseline = 'top';
  for (const t of ticks(a, b, Math.max(2, Math.floor(W / 110)))) {
    const x = L + ((t - a) / (b - a)) * W;
    g.fillRect(Math.round(x), B, 1, 4);
    g.fillText(label(t), x, B + 6);
  }
  g.textAlign = 'left';
  g.fillText(name, 4, B + 6);
  g.strokeStyle = th.line;
  g.strokeRect(L + 0.5, T + 0.5, W, B - T);
}

// Pan/zoom preview: keeps a copy of the plot rectangle of the last exact frame (taken once per exact draw) and, on
// each pan/zoom step, draws it stretched to where the new window puts that frame's window. Copies only the plot
// rectangle, into a canvas reused across steps (no allocation per key press).
export class PlotSnapshot {
  constructor() { this.canvas = null; this.window = null; }

  // After an exact draw: the plot rectangle (CSS px L, T, W, H) of `canvas` depicts `window` = [x0, x1].
  take(canvas, L, T, W, H, window) {
    const dpr = window_dpr();
    const w = Math.max(1, Math.round(W * dpr)), h = Math.max(1, Math.round(H * dpr));
    if (!this.canvas) this.canvas = document.createElement('canvas');
    if (this.canvas.width !== w || this.canvas.height !== h) { this.canvas.width = w; this.canvas.height = h; }
    const g = this.canvas.getContext('2d');
    g.clearRect(0, 0, w, h);
    g.drawImage(canvas, Math.round(L * dpr), Math.round(T * dpr), w, h, 0, 0, w, h);
    this.window = [window[0], window[1]];
  }

  // Draws the kept frame into the plot rectangle as the window [x0, x1] would show it; false if there is none.
  show(canvas, L, T, W, H, x0, x1) {
    const s = this.window;
    if (!this.canvas || !s || !(x1 > x0) || !(s[1] > s[0])) return false;
    const dpr = window_dpr();
    const g = canvas.getContext('2d');
    const span = x1 - x0;
    const dx = ((s[0] - x0) / span) * W;
    const dw = ((s[1] - s[0]) / span) * W;
    g.save();
    g.setTransform(1, 0, 0, 1, 0, 0);
    const px = Math.round(L * dpr), py = Math.round(T * dpr), pw = this.canvas.width, ph = this.canvas.height;
    g.beginPath();
    g.rect(px, py, pw, ph);
    g.clip();
    g.clearRect(px, py, pw, ph);
    g.drawImage(this.canvas, 0, 0, pw, ph, px + dx * dpr, py, dw * dpr, ph);
    g.restore();
    return true;
  }
}

function window_dpr() { return window.devicePixelRatio || 1; }
