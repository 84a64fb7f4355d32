// Canvas plumbing shared by the views: device-pixel sizing that follows the element's box, theme colours read from
// CSS variables, and a stable colour per allocation/stack id.
export function fitCanvas(canvas) {
  const dpr = window.devicePixelRatio || 1;
  const r = canvas.getBoundingClientRect();
  const w = Math.max(1, Math.round(r.width * dpr)), h = Math.max(1, Math.round(r.height * dpr));
  if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return { ctx, width: r.width, height: r.height, dpr };
}

export function theme() {
  const s = getComputedStyle(document.documentElement);
  const v = (n) => s.getPropertyValue(n).trim();
  return { bg: v('--bg'), fg: v('--fg'), muted: v('--muted'), line: v('--line'), panel: v('--panel'), accent: v('--accent'),
           bad: v('--bad'), good: v('--good'), warn: v('--warn'), sel: v('--sel'), grid: v('--grid'),
           dark: matchMedia('(prefers-color-scheme: dark)').matches };
}

// A pleasant, stable colour for an integer key (allocation row, stack id): golden-angle hues.
export function colour(key, dark, alpha) {
  const h = (key * 137.508) % 360;
  const s = 55 + (key * 7) % 25;
  const l = dark ? 48 + (key * 3) % 14 : 58 + (key * 5) % 16;
  return alpha === undefined ? `hsl(${h.toFixed(1)} ${s}% ${l}%)` : `hsl(${h.toFixed(1)} ${s}% ${l}% / ${alpha})`;
}

// Calls `draw` on resize (and once now); returns a disconnect function.
export function onResize(element, draw) {
  let pending = false;
  const ro = new ResizeObserver(() => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; draw(); });
  });
  ro.observe(element);
  return () => ro.disconnect();
}

// "Nice" tick values covering [a, b] with about `n` ticks, at least `minStep` apart (1 for whole numbers).
export function ticks(a, b, n, minStep = 0) {
  const span = b - a;
  if (!(span > 0)) return [a];
  const raw = Math.max(span / Math.max(1, n), minStep);
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) || raw;
  const out = [];
  for (let t = Math.ceil(a / step) * step; t <= b + 1e-9; t += step) out.push(t);
  return out;
}

// Byte ticks on binary boundaries (1, 2, 4... × 2^k) so labels read as round GiB/MiB.
export function byteTicks(max, n) {
  if (!(max > 0)) return [0];
  const raw = max / Math.max(1, n);
  let step = Math.pow(2, Math.ceil(Math.log2(raw)));
  const out = [];
  for (let t = 0; t <= max * 1.0001; t += step) out.push(t);
  return out;
}
