// Diff mode (two files): the two Active Memory Timelines one above the other (same axis, one byte scale fitted to the
// window, zoom and pan linked, hover/pin with the full stack, search marks and annotation strips as in the single-file
// timeline), reserved and live memory side by side, the stacks whose live memory changed most, and the segments
// present in only one file (PyTorch's `compare` rule).
import { afterEvents, bytes, count, deviceTimed, el, micros, since, signedBytes, windowOf } from '../format.js';
import { fitCanvas, theme, onResize } from '../canvas.js';
import { Zoom, latest } from '../zoom.js';
import { allocationCard } from '../detail.js';
import { Strip } from '../annotations.js';
import { knownHits, matchRows } from '../search.js';
import { card } from './widgets.js';
import { snapshotFiles } from '../store.js';
import { drawYGrid, drawBands, outlineRows, drawLife, drawXAxis, PlotSnapshot } from './bands.js';

const M = { left: 72, right: 12, top: 4, bottom: 22 };
const PLOT_H = 164;  // the plot's height (the canvas grows by the annotation strip above it)
const LANE = 14;

// The device a file's timeline shows here: the core's busiest traced device (busiest_traced_device, ranks.h: most
// trace events, then most reserved; rank N of a DDP job uses cuda:N), null when no device has a trace.
function busiestDevice(f) {
  const d = f.info.devices.find((x) => x.busiest);
  return d ? d.device : null;
}

export default {
  id: 'diff',
  title: 'Diff',
  key: '8',
  available: (st) => snapshotFiles(st).length === 2,
  detail: true,
  mount(root, ctx) {
    const st = ctx.state;
    const [a, b] = ctx.files();
    let destroyed = false;
    let zoom = null;
    let hoverX = -1;        // plot x (CSS px) of the cursor, drawn on both timelines
    let hovered = null;     // the panel under the pointer
    let pinned = null;      // {p, alloc, life}: the allocation clicked (Esc unpins); life: its band_outline
    let lanes = 0;          // annotation lanes above both plots (the same for both, so the plots stay equal)
    const panels = [];
    const axisBtn = el('button', { type: 'button', title: 'event axis ↔ time axis (t)' });
    const info = el('span', { class: 'fine timeline-info' });

    const plotW = () => Math.max(10, (panels[0] ? panels[0].wrap.clientWidth : 600) - M.left - M.right);
    const top = () => M.top + lanes * LANE;  // the plot's top edge
    const timeAxis = () => st.axis === 'time';
    // The common axis: events from each trace's start, or time since each trace's first event.
    const span = (p) => (timeAxis() ? Math.max(1, p.axis.time_last_us - p.axis.time_first_us) : p.axis.step_count);
    const base = (p) => (timeAxis() ? p.axis.time_first_us : 0);
    const xLabel = (v) => (timeAxis() ? `+${micros(v)}` : count(Math.round(v)));

    function makePanel(f, which) {
      const device = busiestDevice(f);
      const peak = el('span', { class: 'peak' });
      const found = el('span', { class: 'fine diff-search' });
      const label = el('div', { class: 'diff-label' }, el('strong', { text: which }), ' ', el('span', { class: 'mono', text: f.name }),
                       el('span', { class: 'fine', text: device === null ? ' (no trace)' : ` · cuda:${device} · ` }), peak, found);
      const wrap = el('div', { class: 'canvas-wrap' });
      const canvas = el('canvas', { 'aria-label': `active memory timeline of ${which}` });
      wrap.append(canvas);
      const box = el('div', { class: 'diff-timeline', 'data-diff-panel': which.toLowerCase() }, label, wrap);
      const p = { f, which, device, peak, found, wrap, canvas, box, axis: null, frame: null, hover: null, strip: null,
                  mask: null, snapshot: new PlotSnapshot() };
      p.hit = latest(async (h) => {
        if (!p.frame || !p.frame.body) return null;
        const fr = p.frame;
        return ctx.call(Object.assign({}, fr.r.req, { method: 'timeline_hit', column: h.column, y_px: h.y,
                                                      bytes_per_px: fr.body.bytes_per_px, y_min: fr.body.y_min }));
      }, (ans) => {
        if (destroyed || !ans || hovered !== p) return;
        p.hover = ans.body;
        showDetail();
        draw(p);
      });
      return p;
    }

    // The draw query for the part of the linked window that this file covers (a shorter trace ends early: its
    // columns stop where its events do, at the same pixel scale as the other). The byte scale is set by request().
    function drawRequest(p) {
      if (p.device === null || !zoom) return null;
      const W = Math.round(plotW());
      const H = Math.max(10, p.wrap.clientHeight - top() - M.bottom);
      const c0 = Math.max(zoom.x0, 0), c1 = Math.min(zoom.x1, span(p));
      const pxPerUnit = W / (zoom.x1 - zoom.x0);
      // A trace in the window gets a column even when it is shorter than a pixel (one event against thousands): the
      // blocks alive before it are a band, not "no events".
      const width = Math.max(1, Math.round((c1 - c0) * pxPerUnit));
      if (!(c1 > c0)) return { empty: true, window: [zoom.x0, zoom.x1], W, H };
      return {
        window: [zoom.x0, zoom.x1], W, H, offset: Math.min(W - width, Math.round((c0 - zoom.x0) * pxPerUnit)),
        req: { method: 'timeline_draw', id: p.f.id, device: p.device, axis: timeAxis() ? 'time' : 'step',
               x0: c0 + base(p), x1: c1 + base(p), width, height: H, y_min: 0 },
      };
    }

    // Both timelines for the current window, on one byte scale fitted to it (like the single-file timeline's, which
    // fits the window's highest total): first each window's highest total, from a one-column draw of the same window
    // (the core's window_max covers the same states as the full draw's columns), then both draws at the larger one's
    // scale, so equal heights are equal bytes and the taller of the two fills its plot.
    const request = latest(async () => {
      const rs = panels.map(drawRequest);
      const maxes = await Promise.all(rs.map((r) => (r && r.req
        ? ctx.call(Object.assign({}, r.req, { width: 1, height: 1, bytes_per_px: 1 })).then((m) => m.body.window_max) : 0)));
      let bpp = 1;
      rs.forEach((r, i) => { if (r) bpp = Math.max(bpp, (maxes[i] * 1.06) / r.H); });
      const answers = await Promise.all(rs.map((r, i) => (r && r.req
        ? ctx.call(Object.assign({}, r.req, { bytes_per_px: bpp, marks: !!panels[i].mask })) : null)));
      return rs.map((r, i) => (r ? Object.assign(answers[i] || {}, { r, bpp, windowMax: maxes[i] }) : null));
    }, (frames) => {
      if (destroyed) return;
      frames.forEach((fr, i) => { panels[i].frame = fr; });
      for (const p of panels) draw(p);
    }, (e) => ctx.fail(e));

    function draw(p) {
      const fr = p.frame;
      if (!fr || !fr.r) return;
      const { ctx: g, width, height } = fitCanvas(p.canvas);
      const th = theme();
      g.clearRect(0, 0, width, height);
      const { W, H } = fr.r;
      const L = M.left, T = top(), B = T + H;
      const [w0, w1] = fr.r.window;
      const xOf = (v) => L + ((v - base(p) - w0) / (w1 - w0)) * W;  // a trace's own axis value -> canvas px
      drawYGrid(g, th, L, T, W, B, fr.bpp);
      let rects = 0;
      if (!fr.r.empty) {
        const off = L + fr.r.offset;
        drawBands(g, th, fr.blobs, off, B, { mask: p.mask });
        if (pinned && pinned.p === p && pinned.life)
          drawLife(g, th.bad, pinned.life, timeAxis() ? pinned.life.times : pinned.life.steps,
                   xOf, (bts) => B - bts / fr.bpp, off, T, fr.r.req.width, H);
        const row = p.hover && p.hover.allocation ? p.hover.allocation.row : -1;
        outlineRows(g, fr.blobs, off, B, [[row, th.fg], [pinned && pinned.p === p ? pinned.alloc.row : -1, th.bad]]);
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
      // Annotation ranges of this trace, on the common axis (time since its first event on the time axis).
      if (p.strip) p.strip.draw(g, timeAxis(), (v) => xOf(v) - L, L, W, M.top, LANE, th);
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
      p.canvas.dataset.bytesPerPx = String(fr.bpp);
      p.canvas.dataset.windowMax = String(fr.windowMax);
      p.canvas.dataset.plot = `${L},${T},${W},${H}`;
      info.textContent = `window ${xLabel(zoom.x0)} – ${xLabel(zoom.x1)} ${timeAxis() ? 'from each trace\'s first event' : 'events'}` +
        ` · ${bytes(fr.bpp * H)} high`;
      if (panels.every((q) => q.frame) && !painted) { painted = true; ctx.painted(); }
    }
    let painted = false;

    function preview() {
      for (const p of panels) {
        if (!p.frame || !p.frame.r) continue;
        if (p.snapshot.show(p.canvas, M.left, top(), p.frame.r.W, p.frame.r.H, zoom.x0, zoom.x1))
          p.canvas.dataset.window = `${zoom.x0},${zoom.x1}`;
      }
    }

    // The linked window goes to the URL hash (window=a,b on the common axis) like the other views' windows, so a
    // reload or a shared link reopens the same stretch of both traces; `window` is the hash's (null: everything).
    function makeZoom(window) {
      const hi = Math.max(1, ...panels.map(span));
      zoom = new Zoom(0, hi, window, (z) => { ctx.set({ window: [z.x0, z.x1] }, { quiet: true }); preview(); request(); },
                      timeAxis() ? 1 : 4);
    }

    function toggleAxis() {
      ctx.set({ axis: timeAxis() ? 'event' : 'time', window: null }, { quiet: true });
      axisBtn.textContent = timeAxis() ? 'Axis: time' : 'Axis: events';
      makeZoom();
      request();
    }

    // The detail card: the pinned allocation, else the hovered one, else the hovered column's total. The same card
    // as the single-file timeline's (full stack, frame filter toggle), headed by the file it comes from.
    function showDetail() {
      const h = hovered && hovered.hover;
      const a = pinned ? pinned.alloc : h && h.allocation;
      const p = pinned ? pinned.p : hovered;
      if (a) {
        ctx.detail(el('div', { 'data-detail-panel': p.which.toLowerCase() },
          el('div', { class: 'fine', text: `${p.which}: ${p.f.name} · cuda:${p.device}` }),
          allocationCard(a, { pinned: !!pinned, filter: st.filterFrames, hits: knownHits(p.f, st.search), timeFirst: p.axis.time_origin_us,
                              win: windowOf(p.f.info, p.device),
                              timed: deviceTimed(p.f.info, p.device),
                              onToggleFilter: () => ctx.set({ filterFrames: !st.filterFrames }) })));
      } else if (h) {
        ctx.detail(el('div', null, el('strong', { text: `${p.which}: ${bytes(h.total)} active` }),
          el('div', { class: 'fine', text: `${afterEvents(h.step, undefined, windowOf(p.f.info, p.device))} (${since(h.time_us, p.axis.time_origin_us, deviceTimed(p.f.info, p.device))})` })));
      } else ctx.detail(null);
    }

    function pin(p) {
      const a = p.hover && p.hover.allocation;
      pinned = a && !(pinned && pinned.p === p && pinned.alloc.row === a.row) ? { p, alloc: a, life: null } : null;
      for (const q of panels) q.canvas.dataset.pinned = pinned && pinned.p === q ? String(pinned.alloc.row) : '';
      showDetail();
      for (const q of panels) draw(q);
      if (!pinned) return;
      const mine = pinned;
      ctx.call({ method: 'band_outline', id: p.f.id, device: p.device, row: a.row }).then(({ body, blobs }) => {
        if (pinned !== mine || destroyed) return;
        mine.life = { size: body.size, steps: blobs.steps, times: blobs.times, offsets: blobs.offsets };
        draw(p);
      }).catch(() => {});
    }

    // The search box (a frame regex or a hex address) marks the hits in both timelines, each in its own file.
    async function runSearch(redraw = true) {
      const text = st.search;
      const found = await Promise.all(panels.map((p) => matchRows(ctx.call, p.f, p.device, text)));
      if (destroyed || text !== st.search) return;  // the box changed meanwhile: its own search answers
      panels.forEach((p, i) => {
        p.mask = found[i].mask;
        p.found.textContent = found[i].info ? ` · ${found[i].info}` : '';
        p.canvas.dataset.matches = found[i].mask ? String(found[i].matches) : '';
      });
      showDetail();  // the card marks the frames that match
      if (redraw) request();
    }

    function onKey(e) {
      if (e.target instanceof HTMLInputElement || e.ctrlKey || e.metaKey || !zoom) return;
      if (e.key === 't') { toggleAxis(); return; }
      if (e.key === 'Escape') { if (pinned) { pinned = null; for (const q of panels) q.canvas.dataset.pinned = ''; showDetail(); for (const q of panels) draw(q); } return; }
      if (zoom.key(e)) e.preventDefault();
    }

    function onPointer(p, e) {
      if (!p.frame || !p.frame.r) return;
      const r = p.canvas.getBoundingClientRect();
      const x = e.clientX - r.left - M.left, y = e.clientY - r.top - top();
      const fr = p.frame.r;
      hoverX = x >= 0 && x < fr.W ? Math.floor(x) : -1;
      hovered = p;
      if (p.strip && x >= 0 && x < fr.W && y < 0 && y >= -lanes * LANE) {  // the annotations strip
        const i = p.strip.at(Math.floor((y + lanes * LANE) / LANE), zoom.fromX(x, fr.W) + base(p), timeAxis());
        p.hover = null;
        if (i >= 0) ctx.detail(p.strip.card(i, p.axis.time_origin_us));
        else showDetail();
      } else {
        const inside = !fr.empty && y >= 0 && y < fr.H && x >= fr.offset && x < fr.offset + fr.req.width;
        if (inside) p.hit({ column: Math.floor(x - fr.offset), y: fr.H - y });
        else { p.hover = null; showDetail(); }
      }
      for (const q of panels) draw(q);
    }

    async function start() {
      const d = (await ctx.call({ method: 'diff', ids: [a.id, b.id], top: 60 })).body;
      if (destroyed) return;
      root.append(el('h2', null, 'Diff: ', el('span', { class: 'mono', text: a.name }), ' → ', el('span', { class: 'mono', text: b.name })));
      // Each file's allocated peak first: two runs of one job usually differ there, not in what is left at the end.
      const pa = d.peak_allocated.a, pb = d.peak_allocated.b;
      const peakCards = pa.length === 1 && pb.length === 1
        ? [card('Peak allocated', `${bytes(pa[0].bytes)} → ${bytes(pb[0].bytes)}`,
            // a file without a trace has no peak: its number is the state it holds (the core's `traced`)
            pa[0].traced === false || pb[0].traced === false
              ? `${pa[0].traced === false ? 'A' : 'B'} has no trace: its number is the state it holds, not a peak`
              : signedBytes(pb[0].bytes - pa[0].bytes),
            { 'data-diff-peak': pb[0].bytes - pa[0].bytes })]
        : [...new Set([...pa, ...pb].map((p) => p.device))].sort((x, y) => x - y).map((dev) => {
            // A device only one file has is not a change from 0 B: it is absent from the other.
            const x = pa.find((p) => p.device === dev), y = pb.find((p) => p.device === dev);
            if (!x || !y) return card(`Peak allocated, cuda:${dev}`, `${x ? bytes(x.bytes) : 'absent'} → ${y ? bytes(y.bytes) : 'absent'}`,
              `only in ${x ? 'A' : 'B'}`);
            return card(`Peak allocated, cuda:${dev}`, `${bytes(x.bytes)} → ${bytes(y.bytes)}`, signedBytes(y.bytes - x.bytes));
          });
      root.append(el('div', { class: 'cards' }, ...peakCards,
        card('Reserved', `${bytes(d.reserved_a)} → ${bytes(d.reserved_b)}`, signedBytes(d.reserved_b - d.reserved_a), { 'data-diff-reserved': d.reserved_b - d.reserved_a }),
        card('Live at the end (requested bytes)', `${bytes(d.live_a)} → ${bytes(d.live_b)}`, signedBytes(d.live_b - d.live_a), { 'data-diff-live': d.live_b - d.live_a }),
        card('Segments only in A / only in B', `${count(d.segments_only_a.length)} / ${count(d.segments_only_b.length)}`)));

      // The two timelines.
      panels.push(makePanel(a, 'A'), makePanel(b, 'B'));
      for (const p of panels) {
        if (p.device === null) continue;
        p.axis = (await ctx.call({ method: 'axis', id: p.f.id, device: p.device })).body;
        const mv = (await ctx.call({ method: 'memoryviz', id: p.f.id, device: p.device, with_totals: false })).body;
        p.strip = new Strip(p.f.info.annotations, p.device);
        p.peak.replaceChildren(el('span', { class: 'fine', text: 'peak ' }),
          el('strong', { 'data-peak-bytes': mv.peak_active_bytes, title: `${count(mv.peak_active_bytes)} bytes` }, bytes(mv.peak_active_bytes)),
          el('span', { class: 'fine', text: ` ${afterEvents(mv.peak_step, undefined, windowOf(p.f.info, p.device))} · ${count(mv.allocations)} allocations` }));
      }
      if (destroyed) return;
      // A file without a trace keeps its place, with a message instead of an empty plot.
      const shown = panels.map((p) => (p.device !== null ? p.box : el('div', { class: 'diff-timeline', 'data-diff-panel': p.which.toLowerCase() },
        el('div', { class: 'diff-label' }, el('strong', { text: p.which }), ' ', el('span', { class: 'mono', text: p.f.name })),
        el('div', { class: 'verdict', 'data-empty': 'no-trace', text: `No trace: ${p.f.name} holds no allocation events, so it has ` +
          'no timeline to compare; the numbers and tables here compare its segments and live blocks.' }))));
      const traced = panels.filter((p) => p.device !== null);
      panels.splice(0, panels.length, ...traced);
      // Both plots keep the same height: the canvases grow by the taller strip.
      lanes = Math.max(0, ...panels.map((p) => p.strip.lanes));
      for (const p of panels) p.wrap.style.height = `${PLOT_H + M.top + M.bottom + lanes * LANE}px`;
      if (panels.length) {
        axisBtn.textContent = timeAxis() ? 'Axis: time' : 'Axis: events';
        axisBtn.addEventListener('click', toggleAxis);
        const toolbar = el('div', { class: 'toolbar' }, axisBtn,
          el('button', { type: 'button', title: 'zoom out to everything (Home)', onclick: () => zoom && zoom.reset() }, 'Reset zoom'),
          el('span', { class: 'fine', text: 'zoom and pan move both (wheel, drag, + − ← → Home); one byte scale for both, fitted to the window; click pins' }), info);
        root.append(el('h3', { text: 'Active memory over the trace' }), toolbar, ...shown);
        makeZoom(st.window);
        for (const p of panels) {
          zoom.attach(p.canvas, M.left, plotW, () => pin(p));
          p.canvas.addEventListener('pointermove', (e) => onPointer(p, e));
          p.canvas.addEventListener('pointerleave', () => {
            hoverX = -1;
            p.hover = null;
            if (hovered === p) hovered = null;
            showDetail();
            for (const q of panels) draw(q);
          });
          if (p.strip.ranges.length)
            p.strip.mapSteps(ctx.call, p.f.id, p.device, p.axis.time_last_us).then(() => draw(p), (e) => ctx.fail(e));
        }
        document.addEventListener('keydown', onKey);
        stopResize = onResize(panels[0].wrap, () => request());
        if ((st.search || '').trim()) await runSearch(false);
      } else root.append(el('h3', { text: 'Active memory over the trace' }), ...shown);

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
      if (panels.length) request();
      else ctx.painted();  // neither file has a trace: the tables are the whole view
    }

    let stopResize = () => {};
    start().catch((e) => ctx.fail(e));
    return {
      update(patch) {
        if (!panels.length || !zoom) return;
        if ('search' in patch) runSearch();
        else if ('filterFrames' in patch) showDetail();
      },
      destroy() { destroyed = true; document.removeEventListener('keydown', onKey); stopResize(); },
    };
  },
};
