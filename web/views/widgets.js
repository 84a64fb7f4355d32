// Small DOM pieces the answer views share: cards, a category bar with legend, a stack list.
import { bytes, count, el, lineText } from '../format.js';
import { frameHits, isAddress, searchFailure } from '../search.js';

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

// frames: ["file:line:name", ...] innermost first, with ids (the answers' frame_ids) beside them, or
// [[name, file, line, shown, id], ...] (the bridge's frames). Each line carries its frame id, for markSearch.
export function stackList(frames, st, ids) {
  const box = el('div', { class: 'stack' });
  if (!frames || !frames.length) box.append(el('div', { class: 'fine', text: '(no frames recorded)' }));
  (frames || []).forEach((f, i) => {
    let line, id;
    if (Array.isArray(f)) {
      if (st && st.filterFrames && !f[3]) return;
      line = el('div', null, el('span', { class: 'fn', text: f[0] }), el('span', { class: 'fine', text: `  ${f[1]}:${lineText(f[2])}` }));
      id = f[4];
    } else {
      line = el('div', { text: f });
      id = ids ? ids[i] : undefined;
    }
    if (Number.isInteger(id)) line.dataset.frame = String(id);
    box.append(line);
  });
  return box;
}

// The frame ids an answer's row lists (its site and its stack): the attribute markSearch reads to mark the row.
export function rowFrames(row) {
  const ids = (row.frame_ids || []).slice();
  if (row.site && Number.isInteger(row.site.id)) ids.push(row.site.id);
  return { 'data-frames': ids.join(' ') };
}

// Marks, under each node, the stack lines (data-frame) and rows (data-frames) that list a frame in `hits` (a Set of
// frame ids, or null for none). -> {rows: rows under the nodes, marked: rows marked}.
export function markHits(nodes, hits) {
  let rows = 0, marked = 0;
  for (const node of nodes) {
    if (!node) continue;
    for (const line of node.querySelectorAll('[data-frame]'))
      line.classList.toggle('hit', !!hits && hits.has(Number(line.dataset.frame)));
    for (const row of node.querySelectorAll('[data-frames]')) {
      const on = !!hits && row.dataset.frames.split(' ').some((id) => id !== '' && hits.has(Number(id)));
      row.classList.toggle('hit', on);
      rows += 1;
      marked += on ? 1 : 0;
    }
  }
  return { rows, marked };
}

// The search box over an answer view's stacks and sites (Peak, Leaks, OOM): the frames it matches are marked, as in
// the detail card and the flame graph, and `note` says how many rows list one. nodes() gives the nodes to mark (the
// view's root, and a detail card it opened). -> apply(), to call when the view is drawn and when the search changes.
export function markSearch(ctx, f, note, nodes) {
  const st = ctx.state;
  return async function apply() {
    const text = (st.search || '').trim();
    let hits = null, line = '';
    if (text && isAddress(text)) line = 'an address search marks allocations in Active memory and Diff, not here';
    else if (text) {
      try {
        hits = await frameHits(ctx.call, f, text);
        if (!hits) line = 'invalid regular expression';
      } catch (e) { line = searchFailure(f, e); }
      if (text !== (st.search || '').trim()) return;  // the box changed meanwhile: its own search answers
    }
    const m = markHits(nodes(), hits);
    if (hits) line = `search: ${count(m.marked)} of ${count(m.rows)} rows list a matching frame (marked)`;
    note.textContent = line;
  };
}

// A line of values with its axes: bytes on the left (the lowest and highest, and zero when the line starts above it
// is not claimed: the y range is the values'), the `unit` count along the bottom (1 .. n). The Leaks view's "active
// memory at each iteration start" was a bare line whose height meant nothing without them.
export function lineChart(values, width, height, unit) {
  const c = document.createElement('canvas');
  const dpr = window.devicePixelRatio || 1;
  c.width = width * dpr; c.height = height * dpr;
  c.style.width = `${width}px`; c.style.height = `${height}px`;
  const g = c.getContext('2d');
  g.scale(dpr, dpr);
  const css = getComputedStyle(document.documentElement);
  const fg = css.getPropertyValue('--muted').trim() || '#667085', line = css.getPropertyValue('--line').trim() || '#d8dce3';
  const L = 72, R = 8, T = 8, B = 22;
  const max = Math.max(...values), min = Math.min(...values);
  const span = Math.max(1, max - min);
  const x = (i) => L + (values.length > 1 ? (i / (values.length - 1)) * (width - L - R) : (width - L - R) / 2);
  const y = (v) => T + (1 - (v - min) / span) * (height - T - B);
  g.strokeStyle = line;
  g.beginPath();
  g.moveTo(L, T); g.lineTo(L, height - B); g.lineTo(width - R, height - B);
  g.stroke();
  g.fillStyle = fg;
  g.font = '11px system-ui, sans-serif';
  g.textAlign = 'right';
  g.textBaseline = 'middle';
  g.fillText(bytes(max), L - 6, y(max));
  if (max !== min) g.fillText(bytes(min), L - 6, y(min));
  g.textAlign = 'center';
  g.textBaseline = 'top';
  g.fillText('1', x(0), height - B + 4);
  if (values.length > 1) g.fillText(count(values.length), x(values.length - 1), height - B + 4);
  g.fillText(`${unit} start`, (L + width - R) / 2, height - B + 4);
  g.strokeStyle = '#2f6fdf';
  g.lineWidth = 1.5;
  g.beginPath();
  values.forEach((v, i) => { if (i) g.lineTo(x(i), y(v)); else g.moveTo(x(i), y(v)); });
  g.stroke();
  c.dataset.axes = `${min},${max},${values.length}`;  // for the tests: the y range and the points drawn
  return c;
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

