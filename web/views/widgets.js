// Small DOM pieces the answer views share: cards, a category bar with legend, a stack list.
import { bytes, count, el, lineText } from '../format.js';

export function card(label, value, sub, attrs) {
  return el('div', Object.assign({ class: 'card' }, attrs || {}),
    el('div', { class: 'card-value', text: value }), el('div', { class: 'card-label', text: label }),
    sub ? el('div', { class: 'fine', text: sub }) : null);
}

// The core's categories in its enum order (allocscope/categories.h): the timeline's per-rectangle u8 indexes this.
export const CATEGORIES = ['parameter', 'gradient', 'optimizer_state', 'activation', 'input', 'temporary', 'autograd_detail', 'unknown'];
const ORDER = CATEGORIES;
const HUE = { parameter: 210, gradient: 140, optimizer_state: 280, activation: 30, input: 175, temporary: 0, autograd_detail: 320, unknown: 220 };

export function categoryColour(name) {
  return name === 'unknown' ? 'hsl(220 8% 60%)' : `hsl(${HUE[name] ?? 200} 62% 55%)`;
}

// cats: {name: {bytes, count}}
export function categoryBar(cats, total) {
  const sum = total || ORDER.reduce((a, k) => a + (cats[k] ? cats[k].bytes : 0), 0);
  const bar = el('div', { class: 'catbar' });
  const legend = el('div', { class: 'legend' });
  for (const k of ORDER) {
    const c = cats[k];
    if (!c || !c.bytes) continue;
    const seg = el('div', { class: 'catseg', title: `${k}: ${bytes(c.bytes)} in ${count(c.count)} allocations` });
    seg.style.width = `${(100 * c.bytes) / Math.max(1, sum)}%`;
    seg.style.background = categoryColour(k);
    bar.append(seg);
    const sw = el('span', { class: 'swatch' });
    sw.style.background = categoryColour(k);
    legend.append(el('span', { class: 'legend-item' }, sw, `${k.replace('_', ' ')} ${bytes(c.bytes)} (${count(c.count)})`));
  }
  return el('div', null, bar, legend);
}

// The allocation site of an answer's row, as the core's JSON names it ({site: {text}} or null): the one rule
// (frame_filter.h) that skips the allocator's, the dispatcher's and library frames. A row's frames[0] is the
// innermost frame, usually the allocator's own malloc when C++ frames were recorded, and is never the answer.
export function siteText(row) {
  return row && row.site ? row.site.text : '<no frames>';
}

// frames: ["file:line:name", ...] innermost first, or [[name, file, line, shown], ...]
export function stackList(frames, st) {
  const box = el('div', { class: 'stack' });
  if (!frames || !frames.length) box.append(el('div', { class: 'fine', text: '(no frames recorded)' }));
  for (const f of frames || []) {
    if (Array.isArray(f)) {
      if (st && st.filterFrames && !f[3]) continue;
      box.append(el('div', null, el('span', { class: 'fn', text: f[0] }), el('span', { class: 'fine', text: `  ${f[1]}:${lineText(f[2])}` })));
    } else box.append(el('div', { text: f }));
  }
  return box;
}

export function sparkline(values, width, height, colourCss) {
  const c = document.createElement('canvas');
  const dpr = window.devicePixelRatio || 1;
  c.width = width * dpr; c.height = height * dpr;
  c.style.width = `${width}px`; c.style.height = `${height}px`;
  const g = c.getContext('2d');
  g.scale(dpr, dpr);
  const max = Math.max(1, ...values), min = Math.min(...values, 0);
  g.strokeStyle = colourCss || '#2f6fdf';
  g.lineWidth = 1.5;
  g.beginPath();
  values.forEach((v, i) => {
    const x = values.length > 1 ? (i / (values.length - 1)) * (width - 2) + 1 : width / 2;
    const y = height - 2 - ((v - min) / Math.max(1, max - min)) * (height - 4);
    if (i) g.lineTo(x, y); else g.moveTo(x, y);
  });
  g.stroke();
  return c;
}

