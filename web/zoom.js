// Zoom and pan over a 1-D window [x0, x1] inside [min, max]: mouse wheel zooms around the pointer, drag pans, and
// keys (← → + − Home) do the same; the window goes to the store (and so the URL hash) after each change.
export class Zoom {
  constructor(min, max, window, onChange, minSpan) {
    this.min = min;
    this.max = max;
    this.minSpan = minSpan || 1;
    this.onChange = onChange;
    this.x0 = min;
    this.x1 = max;
    if (window && window[1] > window[0]) this.set(window[0], window[1], true);
  }
  get span() { return this.x1 - this.x0; }
  set(x0, x1, quiet) {
    let span = Math.max(this.minSpan, Math.min(x1 - x0, this.max - this.min));
    x0 = Math.max(this.min, Math.min(x0, this.max - span));
    this.x0 = x0;
    this.x1 = x0 + span;
    if (!quiet) this.onChange(this);
  }
  full() { return this.x0 <= this.min && this.x1 >= this.max; }
  reset() { this.set(this.min, this.max); }
  zoomAt(frac, factor) {
    const c = this.x0 + this.span * frac;
    const span = this.span * factor;
    this.set(c - span * frac, c - span * frac + span);
  }
  pan(fracOfSpan) { this.set(this.x0 + this.span * fracOfSpan, this.x1 + this.span * fracOfSpan); }
  centre(x) { this.set(x - this.span / 2, x + this.span / 2); }
  toX(v, width) { return ((v - this.x0) / this.span) * width; }
  fromX(px, width) { return this.x0 + (px / width) * this.span; }

  // Wires wheel/drag on `element` (plot area starting at `left` px); `onClick(ev)` gets clicks that were not drags.
  attach(element, left, widthFn, onClick) {
    let drag = null;
    element.addEventListener('wheel', (e) => {
      e.preventDefault();
      const r = element.getBoundingClientRect();
      const frac = Math.min(1, Math.max(0, (e.clientX - r.left - left) / widthFn()));
      if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) this.pan((e.deltaX || e.deltaY) / 1000);
      else this.zoomAt(frac, Math.exp(e.deltaY * 0.0015));
    }, { passive: false });
    element.addEventListener('pointerdown', (e) => {
      drag = { x: e.clientX, x0: this.x0, x1: this.x1, moved: false };
      element.setPointerCapture(e.pointerId);
    });
    element.addEventListener('pointermove', (e) => {
      if (!drag) return;
      const dx = e.clientX - drag.x;
      if (Math.abs(dx) > 3) drag.moved = true;
      if (drag.moved) {
        const d = (dx / widthFn()) * (drag.x1 - drag.x0);
        this.set(drag.x0 - d, drag.x1 - d);
      }
    });
    element.addEventListener('pointerup', (e) => {
      const wasDrag = drag && drag.moved;
      drag = null;
      if (!wasDrag && onClick) onClick(e);
    });
  }

  key(e) {
    if (e.key === 'ArrowLeft') this.pan(-0.1);
    else if (e.key === 'ArrowRight') this.pan(0.1);
    else if (e.key === '+' || e.key === '=') this.zoomAt(0.5, 0.7);
    else if (e.key === '-' || e.key === '_') this.zoomAt(0.5, 1 / 0.7);
    else if (e.key === 'Home') this.reset();
    else return false;
    return true;
  }
}

// Runs `fetch(args)` with at most one request in flight; a newer request replaces a queued one (latest wins).
export function latest(fetch, onResult, onError) {
  let busy = false;
  let queued = null;
  async function run(args) {
    busy = true;
    try { onResult(await fetch(args), args); } catch (e) { if (onError) onError(e); }
    busy = false;
    if (queued) { const q = queued; queued = null; run(q); }
  }
  return (args) => { if (busy) queued = args; else run(args); };
}
