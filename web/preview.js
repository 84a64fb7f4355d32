// The loading screen's first picture (issue 43): the memory curve of a file still streaming in, drawn from the
// worker's preview messages (Engine.loadStream's onPreview).
import { bytes, count } from './format.js';
import { fitCanvas, theme } from './canvas.js';

const $ = (id) => document.getElementById(id);
const html = document.documentElement;

// While a file streams in, the memory curve of the trace rows parsed so far (allocscope/preview.h): allocations minus
// completed frees from the first row, so blocks alive before the trace are not in it yet. It grows across the width
// as the file is read; the exact timeline replaces it once the model is built. One file's at a time, the one loading.
let previewT0 = 0;
export function previewStart() {
  previewT0 = performance.now();
  $('preview').classList.add('hidden');
  const c = $('preview-canvas');
  delete c.dataset.previewRows;
  delete c.dataset.previewComplete;
  c.dataset.previews = '0';
  delete html.dataset.firstPreviewMs;
}

export function drawPreview(p) {
  const c = p.curve;
  if (!c || !c.rows || !Array.isArray(c.low) || !c.low.length) return;
  $('preview').classList.remove('hidden');
  const canvas = $('preview-canvas');
  const { ctx, width, height } = fitCanvas(canvas);
  const t = theme();
  ctx.clearRect(0, 0, width, height);
  let lo = 0, hi = 1;
  for (let i = 0; i < c.low.length; ++i) { lo = Math.min(lo, c.low[i]); hi = Math.max(hi, c.high[i]); }
  // The part of the file read so far (the bytes fed against the inflated size expected) spans that part of the width.
  const part = c.complete ? 1 : Math.min(1, Math.max(0.02, c.total ? c.fed / c.total : 1));
  const top = 16, bottom = height - 4;
  const y = (v) => bottom - ((v - lo) / (hi - lo)) * (bottom - top);
  const x = (row) => (row / c.rows) * width * part;
  ctx.fillStyle = t.accent;
  ctx.globalAlpha = 0.35;
  for (let i = 0; i < c.low.length; ++i) {
    const x0 = x(i * c.rows_per_column), x1 = x(Math.min(c.rows, (i + 1) * c.rows_per_column));
    ctx.fillRect(x0, y(c.high[i]), Math.max(1, x1 - x0), bottom - y(c.high[i]));
  }
  ctx.globalAlpha = 1;
  // The highest level so far, marked where it was reached.
  const px = x(c.highest_row), py = y(c.highest);
  ctx.strokeStyle = t.bad;
  ctx.beginPath(); ctx.moveTo(px, top - 4); ctx.lineTo(px, bottom); ctx.stroke();
  ctx.fillStyle = t.fg;
  ctx.font = '12px system-ui, sans-serif';
  const label = `${c.complete ? 'highest' : 'highest so far'}: +${bytes(c.highest)}`;
  ctx.fillText(label, Math.min(Math.max(2, px + 4), width - ctx.measureText(label).width - 2), Math.max(12, py - 4));
  const first = canvas.dataset.previews === '0';
  canvas.dataset.previews = String(Number(canvas.dataset.previews || 0) + 1);
  canvas.dataset.previewRows = String(c.rows);
  canvas.dataset.previewHighest = String(c.highest);
  if (c.complete) canvas.dataset.previewComplete = '1';
  if (first) html.dataset.firstPreviewMs = String(Math.round(performance.now() - previewT0));
  $('preview-label').textContent = `${p.name}: ${count(c.rows)} trace entries ${c.complete ? 'in the file' : 'read so far'}, ` +
    'drawn as allocations minus frees since the trace began (rows of several devices, if any, follow one another). ' +
    'The exact timeline, with the blocks alive before the trace, comes next.';
}
