// Canvas drawing of one timeline_draw answer (the core's rectangles for a window and pixel grid), shared by the Active
// Memory Timeline and the Diff view's two linked timelines: y grid, bands, x axis, plot frame.
import { bytes } from '../format.js';
import { ticks, byteTicks } from '../canvas.js';
import { categoryColour, CATEGORIES } from './widgets.js';

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
// ~80k rectangles for a 1M-event window: one fillRect each (with a CSS colour string parsed per rectangle) cost
// ~150 ms of the page's thread, so they are rasterised straight into pixels (a colour per row computed once) and
// composited over the grid with one drawImage.
export function drawBands(g, th, blobs, L, B, opts) {
  const { x0, x1, y0, y1, row, count: cnt, marked, category: cats } = blobs;
  const n = row.length;
  if (!n) return;
  const hl = (opts && opts.mask) || null;
  const dpr = g.getTransform().a || 1;
  // The image covers the rectangles' extent, in device pixels, clipped to the canvas.
  let xMin = Infinity, xMax = 0, yMax = 0, rowMax = 0;
  for (let i = 0; i < n; ++i) {
    if (x0[i] < xMin) xMin = x0[i];
    if (x1[i] > xMax) xMax = x1[i];
    if (y1[i] > yMax) yMax = y1[i];
    if (row[i] > rowMax) rowMax = row[i];
  }
  const ox = Math.max(0, Math.round((L + xMin) * dpr));
  const oxEnd = Math.min(g.canvas.width, Math.round((L + xMax) * dpr));
  const by = B * dpr;  // the baseline, device px
  const oy = Math.max(0, Math.floor(by - yMax * dpr));
  const oyEnd = Math.min(g.canvas.height, Math.ceil(by));
  const w = oxEnd - ox, h = oyEnd - oy;
  if (w <= 0 || h <= 0) return;
  const px = raster(w, h);
  const u32 = px.u32, stride = px.stride;
  const greyBright = cssRGBA(th.dark ? 'hsl(220 8% 42%)' : 'hsl(220 8% 70%)');
  const greyDim = cssRGBA(th.dark ? 'hsl(220 8% 22%)' : 'hsl(220 8% 88%)');
  const catColours = cats ? CATEGORIES.map((c) => cssRGBA(categoryColour(c))) : null;
  const catUnknown = cats ? cssRGBA(categoryColour('unknown')) : 0;
  const bright = rowColours(th.dark, false, rowMax), dimmed = hl ? rowColours(th.dark, true, rowMax) : null;
  const xShift = L * dpr - ox;
  // One pass, few calls: this loop runs before the JIT has optimised it on the first paint.
  for (let i = 0; i < n; ++i) {
    const r = row[i];
    const dim = hl ? (marked ? !marked[i] : !hl[r]) : false;
    let c;
    if (cats) {
      c = catColours[cats[i]] || catUnknown;
      if (dim) c = withAlpha(c, 0.2);
    } else if (cnt[i] > 1) {
      c = dim ? greyDim : greyBright;
    } else {
      const cache = dim ? dimmed : bright;
      c = cache[r];
      if (c === 0) c = cache[r] = rowColour(r, th.dark, dim);
    }
    let xa = Math.round(x0[i] * dpr + xShift), xb = Math.round(x1[i] * dpr + xShift);
    if (xa < 0) xa = 0;
    if (xb > w) xb = w;
    if (xb <= xa) continue;
    // Rows from the image's top; edges snap to the nearest pixel row (stacked bands share their edge value, so they
    // neither overlap nor leave gaps); a band thinner than one row is blended into its row by coverage, as
    // anti-aliasing would show it.
    const top = by - y1[i] * dpr - oy, bottom = by - y0[i] * dpr - oy;
    let ya = Math.round(top), yb = Math.round(bottom);
    if (ya < 0) ya = 0;
    if (yb > h) yb = h;
    if (yb <= ya) {
      const y = Math.floor((top + bottom) / 2);
      if (bottom > top && y >= 0 && y < h) blendRow(u32, y * stride, xa, xb, c, bottom - top);
    } else if ((c >>> 24) === 255) {
      // Most rectangles are one column wide and a few rows tall: plain stores down the column.
      for (let x = xa; x < xb; ++x)
        for (let k = ya * stride + x, end = yb * stride + x; k < end; k += stride) u32[k] = c;
    } else {
      for (let y = ya; y < yb; ++y) blendRow(u32, y * stride, xa, xb, c, 1);
    }
  }
  const ig = rasterCanvas.getContext('2d');
  ig.putImageData(rasterImage, 0, 0, 0, 0, w, h);
  g.save();
  g.setTransform(1, 0, 0, 1, 0, 0);
  g.drawImage(rasterCanvas, 0, 0, w, h, ox, oy, w, h);
  g.restore();
}

// One reused pixel buffer (the views draw one canvas at a time): cleared to transparent for a w×h image.
let rasterCanvas = null, rasterImage = null, rasterPixels = null;
function raster(w, h) {
  if (!rasterCanvas) rasterCanvas = document.createElement('canvas');
  if (!rasterImage || rasterImage.width < w || rasterImage.height < h) {
    const W = Math.max(w, rasterImage ? rasterImage.width : 0), H = Math.max(h, rasterImage ? rasterImage.height : 0);
    rasterCanvas.width = W;
    rasterCanvas.height = H;
    rasterImage = new ImageData(W, H);
    rasterPixels = new Uint32Array(rasterImage.data.buffer);
  }
  const stride = rasterImage.width;
  // Clear only what this image uses; rows keep the buffer's stride.
  for (let y = 0; y < h; ++y) rasterPixels.fill(0, y * stride, y * stride + w);
  return { u32: rasterPixels, stride };
}

// Source-over of colour c at coverage `cover` onto pixels [base + xa, base + xb) (straight, not premultiplied, alpha).
// Most edge pixels land on transparent ones (the band below has not been drawn there): those are a plain store.
function blendRow(u32, base, xa, xb, c, cover) {
  const sa = ((c >>> 24) / 255) * cover;
  if (sa <= 0) return;
  const rgb = c & 0xffffff;
  const mine = ((Math.round(sa * 255) << 24) | rgb) >>> 0;
  for (let i = base + xa; i < base + xb; ++i) {
    const d = u32[i];
    if (d === 0) { u32[i] = mine; continue; }
    const da = (d >>> 24) / 255;
    const k = da * (1 - sa);
    const oa = sa + k;
    const r = ((c & 255) * sa + (d & 255) * k) / oa, gg = (((c >>> 8) & 255) * sa + ((d >>> 8) & 255) * k) / oa,
      b = (((c >>> 16) & 255) * sa + ((d >>> 16) & 255) * k) / oa;
    u32[i] = ((Math.round(oa * 255) << 24) | (Math.round(b) << 16) | (Math.round(gg) << 8) | Math.round(r)) >>> 0;
  }
}

function withAlpha(c, a) { return ((Math.round(((c >>> 24) / 255) * a * 255) << 24) | (c & 0xffffff)) >>> 0; }

// Packed colours of colour(row, dark, dim ? 0.18 : 1) (canvas.js) per row, computed on first use (0 = not yet) and
// kept per theme, so a redraw builds no CSS strings.
const rowCache = { dark: false, bright: new Uint32Array(0), dimmed: new Uint32Array(0) };
function rowColours(dark, dim, rowMax) {
  if (rowCache.dark !== dark) Object.assign(rowCache, { dark, bright: new Uint32Array(0), dimmed: new Uint32Array(0) });
  const key = dim ? 'dimmed' : 'bright';
  let cache = rowCache[key];
  if (rowMax >= cache.length) {
    const bigger = new Uint32Array(Math.max(rowMax + 1, cache.length * 2, 1024));
    bigger.set(cache);
    cache = rowCache[key] = bigger;
  }
  return cache;
}

function rowColour(key, dark, dim) {
  const h = Math.round(((key * 137.508) % 360) * 10) / 10;
  const s = 55 + (key * 7) % 25;
  const l = dark ? 48 + (key * 3) % 14 : 58 + (key * 5) % 16;
  return packHsl(h, s, l, dim ? 0.18 : 1);
}

// CSS hsl() to a packed 0xAABBGGRR colour (the CSS Color 4 formula; no closures, it runs once per row).
function packHsl(h, s, l, a) {
  s /= 100;
  l /= 100;
  const q = s * Math.min(l, 1 - l);
  const h30 = h / 30;
  const kr = h30 % 12, kg = (8 + h30) % 12, kb = (4 + h30) % 12;
  const r = Math.round((l - q * Math.max(-1, Math.min(kr - 3, 9 - kr, 1))) * 255);
  const g = Math.round((l - q * Math.max(-1, Math.min(kg - 3, 9 - kg, 1))) * 255);
  const b = Math.round((l - q * Math.max(-1, Math.min(kb - 3, 9 - kb, 1))) * 255);
  return ((Math.round(a * 255) << 24) | (b << 16) | (g << 8) | r) >>> 0;
}

// The packed colour of the hsl() strings this module and widgets.js write ("hsl(H S% L%)" or "... / A)").
const cssCache = new Map();
function cssRGBA(text) {
  let c = cssCache.get(text);
  if (c === undefined) {
    const m = /^hsl\(([\d.]+) ([\d.]+)% ([\d.]+)%(?: \/ ([\d.]+))?\)$/.exec(text);
    c = m ? packHsl(Number(m[1]), Number(m[2]), Number(m[3]), m[4] === undefined ? 1 : Number(m[4])) : 0xff808080;
    cssCache.set(text, c);
  }
  return c;
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

// A pinned allocation's band over its whole life (band_outline: at xs[i] its bottom moves to offsets[i] bytes), even
// where it is thinner than a pixel; xOf maps an axis value to canvas px, yOf bytes to canvas px; clipped to the plot.
export function drawLife(g, colour, life, xs, xOf, yOf, L, T, W, H) {
  g.save();
  g.beginPath();
  g.rect(L, T, W, H);
  g.clip();
  g.strokeStyle = colour;
  g.lineWidth = 2;
  g.beginPath();
  for (let i = 0; i + 1 < xs.length; ++i) {
    const xa = xOf(xs[i]), xb = xOf(xs[i + 1]);
    const y0p = yOf(life.offsets[i]), y1p = yOf(life.offsets[i] + life.size);
    g.rect(xa, Math.min(y1p, y0p - 1), Math.max(1, xb - xa), Math.max(1, y0p - y1p));
  }
  g.stroke();
  g.restore();
  g.lineWidth = 1;
}

// Ticks under the plot for the window [a, b] (label(v) formats one), the axis name at the left, and the plot frame.
// shift: what label() adds to a value (a window's step offset), so that ticks fall on round numbers of the labels.
export function drawXAxis(g, th, L, T, W, B, a, b, label, name, shift = 0) {
  g.fillStyle = th.muted;
  g.font = '11px system-ui, sans-serif';
  g.textAlign = 'center';
  g.textBaseline = 'top';
  // Events are whole numbers: a window of 3 events put ticks 0.5 apart, labelled "1 1 2 2 3 3" at half steps.
  for (const u of ticks(a + shift, b + shift, Math.max(2, Math.floor(W / 110)), name === 'event' ? 1 : 0)) {
    const t = u - shift;
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
