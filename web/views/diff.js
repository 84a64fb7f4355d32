// Diff mode (two files): the two Active Memory Timelines one above the other (same axis, same byte scale, zoom and
// pan linked), reserved and live memory side by side, the stacks whose live memory changed most, and the segments
// present in only one file (PyTorch's `compare` rule).
import { bytes, count, el, micros, signedBytes } from '../format.js';
import { fitCanvas, theme, onResize } from '../canvas.js';
import { Zoom, latest } from '../zoom.js';
import { allocationCard } from '../detail.js';
import { card } from './widgets.js';
import { drawYGrid, drawBands, outlineRows, drawXAxis, PlotSnapshot } from './bands.js';

const M = { left: 72, right: 12, top: 4, bottom: 22 };

// The device a file's timeline shows here: the one with the most trace events (rank N of a DDP job uses cuda:N).
function busiestDevice(f) {
  let best = null;
  for (const d of f.info.devices) if (!best || d.events > best.events) best = d;
  return best && best.events > 0 ? best.device : null;
}

export default {
  id: 'diff',
  title: 'Diff',
  key: '8',
  available: (st) => st.files.length === 2,
  mount(root, ctx) {
    const st = ctx.state;
    const [a, b] = ctx.files();
    let destroyed = false;
    let zoom = null;
    let hoverX = -1;        // plot x (CSS px) of the cursor, drawn on both timelines
    const panels = [];
    const axisBtn = el('button', { type: 'button', title: 'event axis ↔ time axis (t)' });
    const info = el('span', { class: 'fine timeline-info' });

    const plotW = () => Math.max(10, (panels[0] ? panels[0].wrap.clientWidth : 600) - M.left - M.right);
    const timeAxis = () => st.axis === 'time';
    // The common axis: events from each trace's start, or time since each trace's first event.
    const span = (p) => (timeAxis() ? Math.max(1, p.axis.time_last_us - p.axis.time_first_us) : p.axis.step_count);
    const base = (p) => (timeAxis() ? p.axis.time_first_us : 0);
    const xLabel = (v) => (timeAxis() ? `+${micros(v)}` : count(Math.round(v)));

    function makePanel(f, which) {
      const device = busiestDevice(f);
      const peak = el('span', { class: 'peak' });
      const label = el('div', { class: 'diff-label' }, el('strong', { text: which }), ' ', el('span', { class: 'mono', text: f.name }),
                       el('span', { class: 'fine', text: device === null ? ' (no trace)' : ` · cuda:${device} · ` }), peak);
      const wrap = el('div', { class: 'canvas-wrap' });
      const canvas = el('canvas', { 'aria-label': `active memory timeline of ${which}` });
      wrap.append(canvas);
      const box = el('div', { class: 'diff-timeline', 'data-diff-panel': which.toLowerCase() }, label, wrap);
      const p = { f, which, device, peak, wrap, canvas, box, axis: null, peakBytes: 0, frame: null, hover: null,
                  snapshot: new PlotSnapshot() };
      p.request = latest(async () => {
        const r = drawRequest(p);
        if (!r) return { r: null };
        const ans = await ctx.call(r.req);
        return Object.assign(ans, { r });
      }, (ans) => { if (!destroyed) { p.frame = ans; draw(p); } }, (e) => ctx.fail(e));
      p.hit = latest(async (h) => {
        if (!p.frame || !p.frame.r) return null;
        const fr = p.frame;
        return ctx.call(Object.assign({}, fr.r.req, { method: 'timeline_hit', column: h.column, y_px: h.y,
                                                      bytes_per_px: fr.body.bytes_per_px, y_min: fr.body.y_min }));
      }, (ans) => {
        if (destroyed || !ans) return;
        p.hover = ans.body;
        const alloc = ans.body.allocation;
        ctx.detail(alloc ? el('div', null, el('div', { class: 'fine', text: `${p.which}: ${p.f.name}` }),
                                allocationCard(alloc, { pinned: false, filter: st.filterFrames, search: st.search, timeFirst: p.axis.time_first_us }))
                         : el('div', null, el('strong', { text: `${p.which}: ${bytes(ans.body.total)} active` }),
                              el('div', { class: 'fine', text: `after event ${count(ans.body.step)}` })));
        draw(p);
      });
      return p;
    }

    // The draw query for the part of the linked window that this file covers (a shorter trace ends early: its
    // columns stop where its events do, at the same pixel scale as the other).
    function drawRequest(p) {
      if (p.device === null || !zoom) return null;
      const W = Math.round(plotW());
      const H = Math.max(10, p.wrap.clientHeight - M.top - M.bottom);
      const c0 = Math.max(zoom.x0, 0), c1 = Math.min(zoom.x1, span(p));
      const pxPerUnit = W / (zoom.x1 - zoom.x0);
      const width = Math.round((c1 - c0) * pxPerUnit);
      if (!(c1 > c0) || width < 1) return { empty: true, window: [zoom.x0, zoom.x1], W, H };
      return {
        window: [zoom.x0, zoom.x1], W, H, offset: Math.round((c0 - zoom.x0) * pxPerUnit),
        req: { method: 'timeline_draw', id: p.f.id, device: p.device, axis: timeAxis() ? 'time' : 'step',
               x0: c0 + base(p), x1: c1 + base(p), width, height: H, y_min: 0, bytes_per_px: bytesPerPx(H) },
      };
    }
    // One byte scale for both, from the larger peak, so equal heights mean equal bytes.
    const bytesPerPx = (H) => Math.max(1, Math.max(...panels.map((p) => p.peakBytes)) * 1.06 / H);

    function draw(p) {
      const fr = p.frame;
      if (!fr || !fr.r) return;
      const { ctx: g, width, height } = fitCanvas(p.canvas);
      const th = theme();
      g.clearRect(0, 0, width, height);
      const { W, H } = fr.r;
      const L = M.left, T = M.top, B = T + H;
      drawYGrid(g, th, L, T, W, B, bytesPerPx(H));
      let rects = 0;
      if (!fr.r.empty) {
        const off = L + fr.r.offset;
        drawBands(g, th, fr.blobs, off, B);
        const row = p.hover && p.hover.allocation ? p.hover.allocation.row : -1;
        outlineRows(g, fr.blobs, off, B, [[row, th.fg]]);
        rects = fr.body.rects;
        if (fr.r.offset + fr.r.req.width < W - 1) {  // this trace ends inside the window: mark where
          const end = off + fr.r.req.width;
          g.fillStyle = th.muted;
          g.fillRect(Math.round(end), T, 1, H);
          g.textAlign = 'right';
          g.textBaseline = 'top';
          g.fillText('end of trace', end - 4, T + 4);
        }
      } else {
        g.fillStyle = th.muted;
        g.textAlign = 'center';
        g.textBaseline = 'middle';
        g.fillText('no events of this trace in the window', L + W / 2, T + H / 2);
      }
      drawXAxis(g, th, L, T, W, B, fr.r.window[0], fr.r.window[1], xLabel, timeAxis() ? 'time' : 'event');
      if (hoverX >= 0 && hoverX < W) {
        g.fillStyle = th.fg;
        g.globalAlpha = 0.35;
        g.fillRect(L + hoverX, T, 1, H);
        g.globalAlpha = 1;
      }
      p.snapshot.take(p.canvas, L, T, W, H, fr.r.window);
      p.canvas.dataset.window = fr.r.window.join(',');
      // An answer for a window the user has already left (a newer one is queued): show it where the current window
      // puts it, rather than jumping back until the newer draw arrives.
      if (zoom && (fr.r.window[0] !== zoom.x0 || fr.r.window[1] !== zoom.x1) &&
          p.snapshot.show(p.canvas, L, T, W, H, zoom.x0, zoom.x1)) p.canvas.dataset.window = `${zoom.x0},${zoom.x1}`;
      p.canvas.dataset.rects = String(rects);
      info.textContent = `window ${xLabel(zoom.x0)} – ${xLabel(zoom.x1)} ${timeAxis() ? 'from each trace\'s first event' : 'events'}`;
      if (panels.every((q) => q.frame) && !painted) { painted = true; ctx.painted(); }
    }
    let painted = false;

    function preview() {
      for (const p of panels) {
        if (!p.frame || !p.frame.r) continue;
        if (p.snapshot.show(p.canvas, M.left, M.top, p.frame.r.W, p.frame.r.H, zoom.x0, zoom.x1))
          p.canvas.dataset.window = `${zoom.x0},${zoom.x1}`;
      }
    }

    function requestAll() { for (const p of panels) p.request(); }

    // The linked window goes to the URL hash (window=a,b on the common axis) like the other views' windows, so a
    // reload or a shared link reopens the same stretch of both traces; `window` is the hash's (null: everything).
    function makeZoom(window) {
      const hi = Math.max(1, ...panels.map(span));
      zoom = new Zoom(0, hi, window, (z) => { ctx.set({ window: [z.x0, z.x1] }, { quiet: true }); preview(); requestAll(); },
                      timeAxis() ? 1 : 4);
    }

    function toggleAxis() {
      ctx.set({ axis: timeAxis() ? 'event' : 'time', window: null }, { quiet: true });
      axisBtn.textContent = timeAxis() ? 'Axis: time' : 'Axis: events';
      makeZoom();
      requestAll();
    }

    function onKey(e) {
      if (e.target instanceof HTMLInputElement || e.ctrlKey || e.metaKey || !zoom) return;
      if (e.key === 't') { toggleAxis(); return; }
      if (zoom.key(e)) e.preventDefault();
    }

    function onPointer(p, e) {
      if (!p.frame || !p.frame.r) return;
      const r = p.canvas.getBoundingClientRect();
      const x = e.clientX - r.left - M.left, y = e.clientY - r.top - M.top;
      const fr = p.frame.r;
      hoverX = x >= 0 && x < fr.W ? Math.floor(x) : -1;
      const inside = !fr.empty && y >= 0 && y < fr.H && x >= fr.offset && x < fr.offset + fr.req.width;
      if (inside) p.hit({ column: Math.floor(x - fr.offset), y: fr.H - y });
      else { p.hover = null; ctx.detail(null); }
      for (const q of panels) draw(q);
    }

    async function start() {
      const d = (await ctx.call({ method: 'diff', ids: [a.id, b.id], top: 60 })).body;
      if (destroyed) return;
      root.append(el('h2', null, 'Diff: ', el('span', { class: 'mono', text: a.name }), ' → ', el('span', { class: 'mono', text: b.name })));
      root.append(el('div', { class: 'cards' },
        card('Reserved', `${bytes(d.reserved_a)} → ${bytes(d.reserved_b)}`, signedBytes(d.reserved_b - d.reserved_a), { 'data-diff-reserved': d.reserved_b - d.reserved_a }),
        card('Live (active blocks)', `${bytes(d.live_a)} → ${bytes(d.live_b)}`, signedBytes(d.live_b - d.live_a), { 'data-diff-live': d.live_b - d.live_a }),
        card('Segments only in A / only in B', `${count(d.segments_only_a.length)} / ${count(d.segments_only_b.length)}`)));

      // The two timelines.
      panels.push(makePanel(a, 'A'), makePanel(b, 'B'));
      for (const p of panels) {
        if (p.device === null) continue;
        p.axis = (await ctx.call({ method: 'axis', id: p.f.id, device: p.device })).body;
        const mv = (await ctx.call({ method: 'memoryviz', id: p.f.id, device: p.device, with_totals: false })).body;
        p.peakBytes = mv.peak_active_bytes;
        p.peak.replaceChildren(el('span', { class: 'fine', text: 'peak ' }),
          el('strong', { 'data-peak-bytes': mv.peak_active_bytes, title: `${count(mv.peak_active_bytes)} bytes` }, bytes(mv.peak_active_bytes)),
          el('span', { class: 'fine', text: ` at event ${count(mv.peak_step)} · ${count(mv.allocations)} allocations` }));
      }
      if (destroyed) return;
      const traced = panels.filter((p) => p.device !== null);
      panels.splice(0, panels.length, ...traced);
      if (panels.length) {
        axisBtn.textContent = timeAxis() ? 'Axis: time' : 'Axis: events';
        axisBtn.addEventListener('click', toggleAxis);
        const toolbar = el('div', { class: 'toolbar' }, axisBtn,
          el('button', { type: 'button', title: 'zoom out to everything (Home)', onclick: () => zoom && zoom.reset() }, 'Reset zoom'),
          el('span', { class: 'fine', text: 'zoom and pan move both (wheel, drag, + − ← → Home); one byte scale for both' }), info);
        root.append(el('h3', { text: 'Active memory over the trace' }), toolbar, ...panels.map((p) => p.box));
        makeZoom(st.window);
        for (const p of panels) {
          zoom.attach(p.canvas, M.left, plotW, null);
          p.canvas.addEventListener('pointermove', (e) => onPointer(p, e));
          p.canvas.addEventListener('pointerleave', () => { hoverX = -1; p.hover = null; ctx.detail(null); for (const q of panels) draw(q); });
        }
        document.addEventListener('keydown', onKey);
        stopResize = onResize(panels[0].wrap, () => requestAll());
      }

      const max = Math.max(1, ...d.stacks.map((s) => Math.abs(s.delta)));
      const t = el('table', { class: 'table' }, el('tr', null, el('th', { class: 'num', text: 'change' }), el('th', { text: '' }),
        el('th', { class: 'num', text: 'A' }), el('th', { class: 'num', text: 'B' }), el('th', { text: 'site / stack' })));
      for (const s of d.stacks) {
        const barCell = el('td', { class: 'bar-cell' });
        const bar = el('div', { class: 'bar' });
        const w = (60 * Math.abs(s.delta)) / max;
        bar.style.width = `${w}px`;
        bar.style.left = s.delta >= 0 ? '60px' : `${60 - w}px`;
        bar.style.background = s.delta >= 0 ? 'var(--bad)' : 'var(--good)';
        barCell.append(bar);
        t.append(el('tr', null, el('td', { class: 'num', text: signedBytes(s.delta) }), barCell,
          el('td', { class: 'num', text: `${bytes(s.bytes_a)} (${count(s.count_a)})` }),
          el('td', { class: 'num', text: `${bytes(s.bytes_b)} (${count(s.count_b)})` }),
          el('td', null, el('details', null, el('summary', { class: 'mono', text: s.site || '<no frames>' }),
            el('div', { class: 'stack', text: s.stack.split(';').join('\n') })))));
      }
      root.append(el('h3', { text: `Live memory by stack: ${count(d.stack_groups)} stacks, largest changes first` }), t);
      const segs = el('table', { class: 'table' }, el('tr', null, el('th', { text: 'only in' }), el('th', { class: 'num', text: 'size' }), el('th', { text: 'address' })));
      for (const [which, list] of [['A', d.segments_only_a], ['B', d.segments_only_b]])
        for (const s of list) segs.append(el('tr', null, el('td', { text: which }), el('td', { class: 'num', text: bytes(s.size) }),
          el('td', { class: 'mono', text: s.addr_hex || '0x' + s.addr.toString(16) })));
      root.append(el('h3', { text: 'Segments in only one file' }), segs);
      if (panels.length) requestAll();
      else ctx.painted();  // neither file has a trace: the tables are the whole view
    }

    let stopResize = () => {};
    start().catch((e) => ctx.fail(e));
    return {
      update() {},
      destroy() { destroyed = true; document.removeEventListener('keydown', onKey); stopResize(); },
    };
  },
};
