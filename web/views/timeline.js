// Active Memory Timeline: every allocation as a stacked band (laid out by the core for the current window and pixel
// grid), event or time axis, minimap, zoom/pan by mouse and keys, annotations, hover/pin with the full stack, and
// search highlighting.
import { afterEvents, bytes, count, deviceTimed, el, fileStep, micros, since, windowOf } from '../format.js';
import { fitCanvas, theme, onResize } from '../canvas.js';
import { Zoom, latest } from '../zoom.js';
import { allocationCard } from '../detail.js';
import { Strip } from '../annotations.js';
import { frameHits, knownHits, matchRows, searchFailure } from '../search.js';
import { categoryColour, CATEGORIES } from './widgets.js';
import { drawYGrid, drawBands, outlineRows, drawLife, drawXAxis, PlotSnapshot } from './bands.js';

const M = { left: 72, right: 12, top: 6, bottom: 24 };
const LANE = 14;

// kind 'allocations': the Active Memory Timeline; 'segments': the Active Cached Segment Timeline (reserved memory).
const KINDS = {
  allocations: { id: 'timeline', title: 'Active memory', long: 'Active Memory Timeline', key: '1', draw: 'timeline_draw', hit: 'timeline_hit',
                 what: 'allocations', search: true },
  segments: { id: 'segments', title: 'Segments', long: 'Active Cached Segment Timeline', key: '2', draw: 'segment_draw', hit: 'segment_hit',
              what: 'segment ranges', search: false },
};

export function timelineView(kind) {
  const K = KINDS[kind];
  return {
  id: K.id,
  title: K.title,
  long: K.long,
  key: K.key,
  available: (st) => st.files.length > 0 && st.files[st.file].info.devices.some((d) => d.events > 0),
  perDevice: true,
  detail: true,
  mount(root, ctx) {
    const f = ctx.file();
    const device = ctx.device();
    const timed = deviceTimed(f.info, device);
    const win = windowOf(f.info, device);  // a window of the file: labels say its steps, and it is what opens first
    let winTimes = null;                   // [its first time, its last time], for the time axis
    const st = ctx.state;
    if (!timed && st.axis === 'time') ctx.set({ axis: 'event', window: null }, { quiet: true });
    const peakLabel = el('span', { class: 'peak' });
    const axisBtn = el('button', { type: 'button', title: 'event axis ↔ time axis (t)' });
    const colourBtn = el('button', { type: 'button', title: 'colour each allocation, or by category (c)' });
    const legend = el('span', { class: 'legend' });
    const info = el('span', { class: 'fine timeline-info' });
    const toolbar = el('div', { class: 'toolbar' },
      axisBtn,
      el('button', { type: 'button', title: 'zoom out to everything (Home)', onclick: () => zoom && zoom.reset() }, 'Reset zoom'),
      el('button', { type: 'button', title: 'centre the peak', onclick: () => jumpToPeak() }, 'Go to peak'),
      K.search ? colourBtn : null, peakLabel, info, legend);
    const whatifBtn = el('button', { type: 'button', class: 'hidden', title: 'stop drawing the What-if prediction',
                                     onclick: () => { ctx.set({ whatif: null }, { quiet: true }); whatif = null; whatifBtn.classList.add('hidden'); request(); } },
                         'Hide what-if');
    toolbar.append(whatifBtn);
    const wrap = el('div', { class: 'canvas-wrap' });
    const canvas = el('canvas', { 'aria-label': 'active memory timeline' });
    wrap.append(canvas);
    const mini = el('div', { class: 'minimap' });
    const miniCanvas = el('canvas', { 'aria-label': 'minimap' });
    mini.append(miniCanvas);
    root.append(toolbar, wrap, mini);

    let zoom = null;
    let frame = null;       // last draw answer {body, blobs, x0, x1, w, h}
    let miniFrame = null;
    let axisInfo = null;    // {steps, time_first_us, time_origin_us, time_last_us}
    let strip = null;       // the annotations strip (annotations.js)
    let hover = null;       // {column, y, answer}
    let pinned = null;      // allocation JSON
    let outline = null;     // the pinned band's life: {steps, times, offsets, size}
    let mask = null;        // Uint8Array over rows, from search
    let searchInfo = '';
    let destroyed = false;
    let painted = false;
    let byCategory = false;
    let whatif = null;      // the What-if scenario's predicted totals and GPU room, drawn over the plot
    let hatch = null;       // the outside memory's hatch tile {colour, tile} (drawOutside)

    const plotW = () => Math.max(10, wrap.clientWidth - M.left - M.right);
    const stripH = () => (strip ? strip.lanes * LANE : 0);
    const plotH = () => Math.max(10, wrap.clientHeight - M.top - M.bottom - stripH());

    function axisRange() {
      return st.axis === 'time'
        ? [axisInfo.time_first_us, Math.max(axisInfo.time_last_us, axisInfo.time_first_us + 1)]
        : [0, axisInfo.steps];
    }

    function makeZoom(window) {
      const [a, b] = axisRange();
      // A window of the file opens on the window's own steps: the rows kept before and after it are context.
      if (!window && win) window = st.axis === 'time' ? winTimes : [win.first, win.last];
      zoom = new Zoom(a, b, window, (z) => { ctx.set({ window: [z.x0, z.x1] }, { quiet: true }); preview(); request(); },
                      st.axis === 'time' ? 1 : 4);
    }

    // Pan/zoom feedback within the frame: the plot rectangle of the last exact frame (kept offscreen) is drawn at once
    // where the new window puts it; the worker's exact draw for the new window replaces it when it arrives.
    const snapshot = new PlotSnapshot();
    function preview() {
      if (!frame || !canvas.width) return;
      if (!snapshot.show(canvas, M.left, M.top + stripH(), frame.r.width, frame.r.height, zoom.x0, zoom.x1)) return;
      canvas.dataset.window = `${zoom.x0},${zoom.x1}`;
    }

    function req(extra) {
      return Object.assign({ method: K.draw, id: f.id, device, axis: st.axis === 'time' ? 'time' : 'step',
                             x0: zoom.x0, x1: zoom.x1, width: Math.round(plotW()), height: Math.round(plotH()),
                             marks: K.search && !!mask, categories: K.search && byCategory,
                             // With a what-if scenario the scale holds its predicted peak (and the GPU's room when it
                             // is near), so the prediction and the line it must stay under are both on screen.
                             bytes_per_px: whatif ? Math.max(1, (whatif.top * 1.06) / Math.round(plotH())) : undefined }, extra);
    }

    const request = latest(async () => {
      const r = req();
      const a = await ctx.call(r);
      return Object.assign(a, { r });
    }, (a) => { if (!destroyed) { frame = a; draw(); } }, (e) => ctx.fail(e));

    const requestMini = latest(async () => {
      const [a, b] = axisRange();
      const w = Math.max(10, mini.clientWidth);
      return ctx.call({ method: K.draw, id: f.id, device, axis: st.axis === 'time' ? 'time' : 'step',
                        x0: a, x1: b, width: w, height: Math.max(10, mini.clientHeight) });
    }, (a) => { if (!destroyed) { miniFrame = a; drawMini(); } }, (e) => ctx.fail(e));

    const hoverQuery = latest(async (h) => {
      if (!frame) return null;
      return ctx.call(Object.assign({}, frame.r, { method: K.hit, column: h.column, y_px: h.y,
                                                    bytes_per_px: frame.body.bytes_per_px, y_min: frame.body.y_min }));
    }, (a, h) => {
      if (destroyed || !a) return;
      hover = { column: h.column, y: h.y, answer: a.body };
      // The cursor's event is where the flame graph and the allocator state open next.
      ctx.set({ step: a.body.step }, { quiet: true });
      showDetail();
      draw();
    });

    function xLabel(v) {
      return st.axis === 'time' ? `+${micros(v - axisInfo.time_origin_us)}` : count(fileStep(Math.round(v), win));
    }

    function draw() {
      if (!frame) return;
      const { ctx: g, width, height } = fitCanvas(canvas);
      const th = theme();
      g.clearRect(0, 0, width, height);
      const L = M.left, T = M.top + stripH(), W = frame.r.width, H = frame.r.height;
      const B = T + H;
      const bpp = frame.body.bytes_per_px;
      drawYGrid(g, th, L, T, W, B, bpp);
      const hoverRow = hover && hover.answer.allocation ? hover.answer.allocation.row : -1;
      const pinRow = pinned ? pinned.row : -1;
      drawBands(g, th, frame.blobs, L, B, { mask });
      const outsideInfo = frame.blobs.column_outside ? drawOutside(g, th, L, T, W, B, bpp, frame.body.y_min) : '';
      const whatifInfo = whatif ? drawWhatif(g, th, L, T, W, B, bpp, frame.body.y_min) : '';
      // the pinned allocation's whole life, even where it is thinner than a pixel
      if (outline && pinned && outline.row === pinned.row)
        drawLife(g, th.bad, outline, st.axis === 'time' ? outline.times : outline.steps, (v) => L + zoom.toX(v, W),
                 (b) => B - (b - frame.body.y_min) / bpp, L, T, W, H);
      // hovered / pinned allocation outlined
      outlineRows(g, frame.blobs, L, B, [[hoverRow, th.fg], [pinRow, th.bad]]);
      drawXAxis(g, th, L, T, W, B, zoom.x0, zoom.x1, xLabel, st.axis === 'time' ? 'time' : 'event',
                st.axis === 'time' ? 0 : fileStep(0, win));
      drawOoms(g, th, L, T, W, B);
      // annotations strip
      if (strip) strip.draw(g, st.axis === 'time', (v) => zoom.toX(v, W), L, W, M.top, LANE, th);
      // cursor
      if (hover) {
        g.fillStyle = th.fg;
        g.globalAlpha = 0.35;
        g.fillRect(L + hover.column, T, 1, H);
        g.globalAlpha = 1;
      }
      snapshot.take(canvas, L, T, W, H, [frame.r.x0, frame.r.x1]);
      canvas.dataset.window = `${frame.r.x0},${frame.r.x1}`;
      canvas.dataset.rects = frame.body.rects;
      // An answer for a window the user has already left (a newer one is queued): show it where the current window
      // puts it, rather than jumping back until the newer draw arrives.
      if (frame.r.x0 !== zoom.x0 || frame.r.x1 !== zoom.x1) preview();
      info.textContent = `${count(frame.body.rects)} rectangles for ${count(frame.body.rows)} ${K.what} · ` +
        `window ${xLabel(zoom.x0)} – ${xLabel(zoom.x1)}${searchInfo ? ' · ' + searchInfo : ''}` +
        `${outsideInfo ? ' · ' + outsideInfo : ''}${whatifInfo ? ' · ' + whatifInfo : ''}`;
      maybePainted();
      drawMiniWindow();
    }

    // The What-if view's scenario on this timeline: its predicted total per bucket of steps (faint, stepped) and the
    // GPU's room for the allocator (dashed), on the plot's own byte scale. Both come from the core's what-if answer.
    async function loadWhatif() {
      const w = st.whatif;
      if (K.id !== 'timeline' || !w || w.file !== f.id || w.device !== device) return;
      const r = await ctx.call({ method: 'whatif', id: f.id, device, batch: w.batch, seq: w.seq, gpu: w.gpu || '', points: 2000 });
      const n = r.blobs.predicted.length;
      const steps = r.body.steps;
      const starts = Array.from({ length: n + 1 }, (_, b) => Math.min(steps - 1, Math.floor((b * steps) / n)));
      const times = st.axis === 'time' ? (await ctx.call({ method: 'axis', id: f.id, device, steps: starts })).body.times : null;
      whatif = { predicted: r.blobs.predicted, at: times || starts, room: r.body.gpu ? r.body.gpu.allocator_room : 0,
                 gpu: r.body.gpu ? r.body.gpu.label : '', peak: r.body.predicted_allocated, batch: w.batch, seq: w.seq };
      const tallest = Math.max(r.body.predicted_allocated, ...r.blobs.measured);
      whatif.top = whatif.room && whatif.room < 1.5 * tallest ? Math.max(tallest, whatif.room) : tallest;
      canvas.dataset.whatifPeak = whatif.peak;
      canvas.dataset.gpuRoom = whatif.room;
      whatifBtn.classList.remove('hidden');
      request();
    }

    function drawWhatif(g, th, L, T, W, B, bpp, y0) {
      const toY = (b) => Math.max(T, B - (b - y0) / bpp);
      g.save();
      g.beginPath();
      g.rect(L, T, W, B - T);
      g.clip();
      g.strokeStyle = th.bad;
      g.globalAlpha = 0.55;
      g.lineWidth = 2;
      g.beginPath();
      let started = false;
      for (let b = 0; b < whatif.predicted.length; ++b) {
        const xa = L + zoom.toX(whatif.at[b], W), xb = L + zoom.toX(whatif.at[b + 1], W);
        if (xb < L || xa > L + W) continue;
        const y = toY(whatif.predicted[b]);
        if (!started) { g.moveTo(xa, y); started = true; } else g.lineTo(xa, y);
        g.lineTo(xb, y);
      }
      g.stroke();
      g.restore();
      const above = [];
      if (whatif.room) {
        const y = B - (whatif.room - y0) / bpp;
        if (y >= T) {
          g.save();
          g.strokeStyle = th.fg;
          g.setLineDash([6, 4]);
          g.beginPath();
          g.moveTo(L, y);
          g.lineTo(L + W, y);
          g.stroke();
          g.restore();
          g.fillStyle = th.fg;
          g.fillText(`${whatif.gpu}: room for the allocator ${bytes(whatif.room)}`, L + 6, y - 4);
        } else {
          above.push(`${whatif.gpu}'s room ${bytes(whatif.room)}`);
        }
      }
      if (whatif.peak > y0 + bpp * (B - T)) above.push(`the predicted peak ${bytes(whatif.peak)}`);
      return `what-if batch ×${whatif.batch}, sequence ×${whatif.seq}: predicted peak ${bytes(whatif.peak)}` +
        (above.length ? ` (${above.join(' and ')} above this scale)` : '');
    }

    // A merged snapshot (PyTorch's own plus what allocscope's capture saw outside its allocator): the outside memory
    // of each column's state, stacked on PyTorch's reserved bytes in the warning colour, so the top is the device's
    // memory in all. The core sends it per column with the draw answer (column_outside).
    function drawOutside(g, th, L, T, W, B, bpp, y0) {
      const tot = frame.blobs.column_total, out = frame.blobs.column_outside;
      const toY = (b) => Math.max(T, B - (b - y0) / bpp);
      // Hatched, so it never reads as one more of PyTorch's segments (the tile is made once per colour).
      const colour = th.warn || th.bad;
      if (!hatch || hatch.colour !== colour) {
        const tile = document.createElement('canvas');
        tile.width = tile.height = 8;
        const tg = tile.getContext('2d');
        tg.strokeStyle = colour;
        tg.lineWidth = 2;
        tg.beginPath();
        tg.moveTo(0, 8); tg.lineTo(8, 0);
        tg.stroke();
        hatch = { colour, tile };
      }
      const tile = hatch.tile;
      g.save();
      g.globalAlpha = 0.18;
      g.fillStyle = th.warn || th.bad;
      let most = 0;
      for (let c = 0; c < out.length && c < W; ++c) {
        if (!out[c]) continue;
        most = Math.max(most, out[c]);
        const ya = toY(tot[c] + out[c]), yb = toY(tot[c]);
        if (yb - ya > 0) g.fillRect(L + c, ya, 1, yb - ya);
      }
      g.globalAlpha = 0.9;
      g.fillStyle = g.createPattern(tile, 'repeat');
      for (let c = 0; c < out.length && c < W; ++c) {
        if (!out[c]) continue;
        const ya = toY(tot[c] + out[c]), yb = toY(tot[c]);
        if (yb - ya > 0) g.fillRect(L + c, ya, 1, yb - ya);
      }
      g.restore();
      canvas.dataset.outsideShown = most;
      return `hatched: memory outside PyTorch's allocator (NCCL, cuBLAS, ... see Overview), up to ${bytes(most)} here, ` +
        `${bytes(frame.body.outside_peak)} at most`;
    }

    // The device's oom events (the core's `info`), as red lines where the request failed: the moment an OOM file is
    // opened for, which the user used to find by reading the OOM view's event number.
    const oomEvents = ((f.info.devices.find((d) => d.device === device) || {}).oom_events) || [];
    // `annotate` trace entries (newer PyTorch): dotted marks with their text, as moments the user named.
    const notes = ((f.info.devices.find((d) => d.device === device) || {}).annotate_events) || [];
    let oomAt = null;  // their x on the current axis: event e happens between steps e and e + 1
    let noteAt = [];
    async function placeOoms() {
      const at = async (events) => (st.axis !== 'time' ? events.map((e) => e + 0.5)
        : (await ctx.call({ method: 'axis', id: f.id, device, steps: events.map((e) => e + 1) })).body.times);
      noteAt = notes.length ? await at(notes.map((n) => n[0])) : [];
      oomAt = oomEvents.length ? await at(oomEvents) : [];
    }
    function drawOoms(g, th, L, T, W, B) {
      let notesShown = 0;
      g.save();
      g.strokeStyle = th.muted;
      g.fillStyle = th.muted;
      g.font = '11px system-ui, sans-serif';
      g.setLineDash([1, 3]);
      noteAt.forEach((v, i) => {
        const x = L + zoom.toX(v, W);
        if (x < L - 1 || x > L + W + 1) return;
        ++notesShown;
        g.beginPath();
        g.moveTo(x, T);
        g.lineTo(x, B);
        g.stroke();
        g.fillText(notes[i][1].slice(0, 40), Math.min(x + 3, L + W - 60), T + 26);
      });
      g.restore();
      canvas.dataset.annotateMarks = notesShown;
      if (!oomAt || !oomAt.length) return;
      let shown = 0;
      g.save();
      g.strokeStyle = th.bad;
      g.fillStyle = th.bad;
      g.lineWidth = 2;
      g.font = 'bold 11px system-ui, sans-serif';
      for (const v of oomAt) {
        const x = L + zoom.toX(v, W);
        if (x < L - 1 || x > L + W + 1) continue;
        ++shown;
        g.setLineDash([5, 3]);
        g.beginPath();
        g.moveTo(x, T);
        g.lineTo(x, B);
        g.stroke();
        g.setLineDash([]);
        g.fillText('OOM', Math.min(x + 4, L + W - 30), T + 12);
      }
      g.restore();
      canvas.dataset.oomMarks = shown;  // for the tests: the marks inside the window
    }

    function drawMini() {
      if (!miniFrame) return;
      drawMiniWindow();
    }

    function drawMiniWindow() {
      if (!miniFrame || !zoom) return;
      const { ctx: g, width, height } = fitCanvas(miniCanvas);
      const th = theme();
      g.clearRect(0, 0, width, height);
      g.fillStyle = th.panel;
      g.fillRect(0, 0, width, height);
      const tot = miniFrame.blobs.column_total;
      const max = Math.max(1, ...tot);
      g.fillStyle = th.accent;
      g.globalAlpha = 0.55;
      const w = width / tot.length;
      for (let c = 0; c < tot.length; ++c) {
        const h = (tot[c] / max) * (height - 2);
        g.fillRect(c * w, height - h, Math.max(1, w), h);
      }
      g.globalAlpha = 1;
      const [a, b] = axisRange();
      const wx0 = ((zoom.x0 - a) / (b - a)) * width, wx1 = ((zoom.x1 - a) / (b - a)) * width;
      g.fillStyle = th.sel;
      g.fillRect(wx0, 0, Math.max(2, wx1 - wx0), height);
      g.strokeStyle = th.accent;
      g.strokeRect(wx0 + 0.5, 0.5, Math.max(2, wx1 - wx0), height - 1);
    }

    function showDetail() {
      const a = pinned || (hover && hover.answer.allocation);
      if (!a) {
        if (hover) {
          const h = hover.answer;
          ctx.detail(el('div', null, el('strong', { text: `${bytes(h.total)} active` }),
            el('div', { class: 'fine', text: `${afterEvents(h.step, undefined, win)} (${since(h.time_us, axisInfo.time_origin_us, timed)})` })));
        } else ctx.detail(null);
        return;
      }
      ctx.detail(allocationCard(a, { pinned: !!pinned, filter: st.filterFrames, hits: knownHits(f, st.search), timed,
                                     timeFirst: axisInfo.time_origin_us, win,
                                     onToggleFilter: () => ctx.set({ filterFrames: !st.filterFrames }) }));
    }

    async function jumpToPeak() {
      const peakStep = kind === 'segments' ? frame.body.peak_step
        : (await ctx.call({ method: 'memoryviz', id: f.id, device, with_totals: false })).body.peak_step;
      let x = peakStep + 0.5;
      if (st.axis === 'time') x = (await ctx.call({ method: 'axis', id: f.id, device, steps: [peakStep] })).body.times[0];
      zoom.centre(x);
    }
    // Segments are not marked (a segment holds many allocations, each with its own stack): the toolbar says so, and
    // the card still marks the frames of the segment's own stack that match.
    async function segmentSearch(text) {
      text = (text || '').trim();
      if (!text) return { mask: null, info: '' };
      let failure = '';
      try { await frameHits(ctx.call, f, text); } catch (e) { failure = ` (${searchFailure(f, e)})`; }
      return { mask: null, info: `segments are not searched: Active memory (1) marks the allocations that match${failure}` };
    }
    async function runSearch() {
      const text = st.search;
      const m = K.search ? await matchRows(ctx.call, f, device, text) : await segmentSearch(text);
      if (destroyed || text !== st.search) return;  // the box changed meanwhile: its own search answers
      mask = m.mask;
      searchInfo = m.info;
      showDetail();  // the card marks the frames that match
      if (zoom) request(); else draw();
    }

    function onPointer(e) {
      if (!frame) return;
      const r = canvas.getBoundingClientRect();
      const x = e.clientX - r.left - M.left, y = e.clientY - r.top - M.top - stripH();
      if (x >= 0 && x < frame.r.width && y < 0 && y >= -stripH()) {  // the annotations strip
        const i = strip.at(Math.floor((y + stripH()) / LANE), zoom.fromX(x, frame.r.width), st.axis === 'time');
        if (i >= 0) { ctx.detail(strip.card(i, axisInfo.time_origin_us)); return; }
      }
      if (x < 0 || x >= frame.r.width || y < 0 || y >= frame.r.height) {
        if (hover) { hover = null; showDetail(); draw(); }
        return;
      }
      hoverQuery({ column: Math.floor(x), y: frame.r.height - y });
    }

    // The headline (peak) numbers; the view counts as painted once they and the first exact frame are shown.
    async function headline() {
      if (kind === 'segments') {
        const d = await ctx.call({ method: K.draw, id: f.id, device, x0: 0, x1: axisInfo.steps, width: 1, height: 1 });
        peakLabel.replaceChildren(el('span', { class: 'fine', text: 'peak reserved ' }),
          el('strong', { 'data-peak-reserved': d.body.peak_bytes, title: `${count(d.body.peak_bytes)} bytes` }, bytes(d.body.peak_bytes)),
          el('span', { class: 'fine', text: ` at step ${count(fileStep(d.body.peak_step, win))} (${afterEvents(d.body.peak_step, undefined, win)})` }));
      } else {
        const mv = await ctx.call({ method: 'memoryviz', id: f.id, device, with_totals: false });
        peakLabel.replaceChildren(el('span', { class: 'fine', text: 'peak allocated ' }),
          el('strong', { 'data-peak-bytes': mv.body.peak_active_bytes, title: `${count(mv.body.peak_active_bytes)} bytes` },
             bytes(mv.body.peak_active_bytes)),
          el('span', { class: 'fine', text: ` at step ${count(fileStep(mv.body.peak_step, win))} (${afterEvents(mv.body.peak_step, undefined, win)}) · ${count(mv.body.allocations)} allocations` }));
      }
    }
    let headlineShown = false;
    function maybePainted() {
      if (!painted && frame && headlineShown) { painted = true; ctx.painted(); }
    }

    async function start() {
      const ax = await ctx.call({ method: 'axis', id: f.id, device });
      axisInfo = { steps: ax.body.step_count, time_first_us: ax.body.time_first_us, time_origin_us: ax.body.time_origin_us,
                   time_last_us: ax.body.time_last_us };
      if (win) winTimes = (await ctx.call({ method: 'axis', id: f.id, device, steps: [win.first, win.last] })).body.times;
      strip = new Strip(f.info.annotations, device);
      // The first view's queries go out together, in the order the first paint needs them (the worker answers in
      // order): annotation steps, the plot, the minimap, the headline. The plot is painted on the page's thread while
      // the worker still computes the rest, instead of each query waiting for the page to ask for the next.
      if (strip.ranges.length)
        strip.mapSteps(ctx.call, f.id, device, axisInfo.time_last_us).then(() => { if (frame) draw(); }, (e) => ctx.fail(e));
      axisBtn.textContent = st.axis === 'time' ? 'Axis: time' : 'Axis: events';
      makeZoom(st.window);
      zoom.attach(canvas, M.left, plotW, () => {
        const a = hover && hover.answer.allocation;
        pinned = a && (!pinned || pinned.row !== a.row) ? a : null;
        showDetail();
        draw();
        if (pinned && K.id === 'timeline') {
          const row = pinned.row;
          ctx.call({ method: 'band_outline', id: f.id, device, row }).then(({ body, blobs }) => {
            outline = { row, size: body.size, steps: blobs.steps, times: blobs.times, offsets: blobs.offsets };
            draw();
          }).catch(() => {});
        }
      });
      canvas.addEventListener('pointermove', onPointer);
      canvas.addEventListener('pointerleave', () => { hover = null; showDetail(); draw(); });
      // Minimap: press or drag to move the window there.
      let miniDrag = false;
      const miniGo = (e) => {
        const r = mini.getBoundingClientRect();
        const [a, b] = axisRange();
        zoom.centre(a + ((e.clientX - r.left) / r.width) * (b - a));
      };
      mini.addEventListener('pointerdown', (e) => { miniDrag = true; mini.setPointerCapture(e.pointerId); miniGo(e); });
      mini.addEventListener('pointermove', (e) => { if (miniDrag) miniGo(e); });
      mini.addEventListener('pointerup', () => { miniDrag = false; });
      if (st.search) await runSearch();
      await placeOoms();
      request();
      requestMini();
      headline().then(() => { headlineShown = true; maybePainted(); }, (e) => ctx.fail(e));
      loadWhatif().catch((e) => ctx.fail(e));
    }

    function toggleAxis() {
      if (!timed && st.axis !== 'time') return;  // no times to draw on: the event axis only
      ctx.set({ axis: st.axis === 'time' ? 'event' : 'time', window: null }, { quiet: true });
      axisBtn.textContent = st.axis === 'time' ? 'Axis: time' : 'Axis: events';
      makeZoom(null);
      hover = null;
      oomAt = null;
      placeOoms().then(() => draw(), (e) => ctx.fail(e));
      request();
      requestMini();
      if (whatif) loadWhatif().catch((e) => ctx.fail(e));  // its buckets' positions on the other axis
    }
    axisBtn.addEventListener('click', toggleAxis);
    if (!timed) {
      axisBtn.disabled = true;
      axisBtn.title = 'this trace records no times (PyTorch 2.0 and 2.1 write none): events only';
    }
    function toggleColour() {
      byCategory = !byCategory;
      colourBtn.textContent = byCategory ? 'Colour: category' : 'Colour: allocation';
      legend.replaceChildren(...(byCategory ? CATEGORIES.map((c) => {
        const sw = el('span', { class: 'swatch' });
        sw.style.background = categoryColour(c);
        return el('span', { class: 'legend-item' }, sw, c.replace('_', ' '));
      }) : []));
      request();
    }
    colourBtn.textContent = 'Colour: allocation';
    colourBtn.addEventListener('click', toggleColour);

    function onKey(e) {
      if (e.target instanceof HTMLInputElement || e.ctrlKey || e.metaKey || !zoom) return;
      if (e.key === 't') { toggleAxis(); return; }
      if (e.key === 'c' && K.search) { toggleColour(); return; }
      if (e.key === 'Escape') { pinned = null; showDetail(); draw(); return; }
      if (zoom.key(e)) e.preventDefault();
    }
    document.addEventListener('keydown', onKey);
    const stopResize = onResize(wrap, () => { if (zoom) { request(); requestMini(); } });

    start().catch((e) => ctx.fail(e));
    return {
      update(patch) {
        if ('search' in patch) runSearch();
        if ('filterFrames' in patch) showDetail();
      },
      destroy() { destroyed = true; document.removeEventListener('keydown', onKey); stopResize(); },
    };
  },
  };
}

export default timelineView('allocations');
