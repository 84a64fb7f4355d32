// Allocator State History: the caching allocator's segments and blocks after any event, as an address-ordered memory
// map wrapped into rows; a scrubber and arrow keys move through events; hover shows the block and its stack.
import { afterEvents, bytes, count, deviceTimed, el, since, windowOf } from '../format.js';
import { fitCanvas, theme, colour, onResize } from '../canvas.js';
import { latest } from '../zoom.js';
import { allocationCard } from '../detail.js';
import { frameHits } from '../search.js';

const ROW_H = 22, GAP = 3, PAD = 8;
const CAPTION = 18;  // the line under the map (counts and scale): rows stop above it, never under it
const NO_ROW = 0xffffffff;

export default {
  id: 'state',
  title: 'State history',
  long: 'Allocator State History',
  key: '3',
  // Without a trace, the one state the snapshot holds: its segments' live blocks (fromSegments, app.js).
  available: (st) => st.files.length > 0 && st.files[st.file].info.devices.some((d) => d.events > 0 || d.segments > 0),
  perDevice: true,
  fromSegments: true,
  detail: true,
  mount(root, ctx) {
    const f = ctx.file();
    const device = ctx.device();
    const st = ctx.state;
    // A device without a trace has one state, the one the snapshot holds: no scrubber, and the page says why.
    const traced = ((f.info.devices.find((d) => d.device === device) || {}).events || 0) > 0;
    const slider = el('input', { type: 'range', min: 0, max: 1, value: 0, step: 1, 'aria-label': 'event', class: 'scrubber' });
    const stepLabel = el('span', { class: 'mono' });
    const eventLabel = el('span', { class: 'fine' });
    const sums = el('div', { class: 'cards compact' });
    const wrap = el('div', { class: 'canvas-wrap' });
    const canvas = el('canvas', { 'aria-label': 'allocator state' });
    wrap.append(canvas);
    root.append(
      traced ? el('div', { class: 'toolbar' },
        el('button', { type: 'button', title: 'previous event (←, shift: 100)', onclick: () => go(cur - 1) }, '◀'),
        slider,
        el('button', { type: 'button', title: 'next event (→, shift: 100)', onclick: () => go(cur + 1) }, '▶'),
        stepLabel, eventLabel)
        : el('p', { class: 'verdict', 'data-no-trace-state': device }, `${ctx.deviceName(device)}: the allocator's state when the ` +
          'snapshot was taken (its segments and their blocks, with the stacks PyTorch kept for them). No trace was ' +
          'recorded, so there is no history to step through: torch.cuda.memory._record_memory_history() before the ' +
          'work records one.'),
      sums, wrap,
      el('p', { class: 'fine', text: 'Each bar is a segment (address order, wrapped into rows); coloured blocks are live ' +
        'allocations, striped ones wait for free_completed, grey is cached but free. Hover for the stack.' }));

    const win = windowOf(f.info, device);  // a window of the file: its steps and times are said as the file's
    let cur = 0, steps = 1, data = null, layout = [], hover = -1, painted = false, destroyed = false, timeFirst = 0;

    const fetchState = latest((step) => ctx.call({ method: 'state_at', id: f.id, device, step }),
      (a) => { if (!destroyed) { data = a; render(); } }, (e) => ctx.fail(e));

    function go(step) {
      cur = Math.max(0, Math.min(steps - 1, Math.round(step)));
      slider.value = String(cur);
      ctx.set({ step: cur }, { quiet: true });
      fetchState(cur);
    }

    function card(label, value, key) {
      return el('div', { class: 'card' }, el('div', { class: 'card-value', 'data-state-value': key, 'data-value': value }, bytes(value)),
                el('div', { class: 'card-label', text: label }));
    }

    function render() {
      const b = data.body;
      stepLabel.textContent = afterEvents(b.step, b.steps - 1, win);
      eventLabel.textContent = b.event
        ? `${b.event.action} ${bytes(b.event.size)} at ${b.event.address} · ${since(b.time_us, timeFirst, deviceTimed(f.info, device))}`
        : 'before the first event';
      sums.replaceChildren(card('reserved', b.reserved_bytes, 'reserved'), card('allocated (blocks)', b.allocated_bytes, 'allocated'),
        card('requested', b.requested_bytes, 'requested'), card('pending free', b.pending_free_bytes, 'pending'),
        card('rounding waste', b.rounding_waste_bytes, 'waste'), card('cached, free', b.inactive_bytes, 'inactive'));
      draw();
    }

    // Lays segments out as a tape of rows: x advances by size/bytesPerPx (min 3 px) plus a gap.
    function draw() {
      if (!data) return;
      const { ctx: g, width, height } = fitCanvas(canvas);
      const th = theme();
      g.clearRect(0, 0, width, height);
      const { seg_size, blk_seg, blk_offset, blk_size, blk_requested, blk_row, blk_flags } = data.blobs;
      canvas.dataset.stateSegments = seg_size.length;  // for the tests: the segments alive after this event
      canvas.dataset.stateStep = data.body.step;
      const W = width - 2 * PAD;
      const rows = Math.max(1, Math.floor((height - PAD - CAPTION) / ROW_H));
      let total = 0;
      for (const s of seg_size) total += s;
      let bpp = Math.max(1, (total * 1.05) / (W * rows - seg_size.length * (GAP + 3)));
      layout = [];
      let x = 0, r = 0;
      let segX = [];
      // pieces: {seg, row, x, w, b0 (bytes into segment)}
      const place = () => {
        x = 0; r = 0; segX = [];
        for (let k = 0; k < seg_size.length; ++k) {
          let w = Math.max(3, seg_size[k] / bpp);
          if (x > 0 && x + w > W && w <= W) { r++; x = 0; }
          const pieces = [];
          let b0 = 0;
          while (w > 0) {
            const take = Math.min(w, W - x);
            pieces.push({ row: r, x, w: take, b0 });
            b0 += take * bpp;
            w -= take;
            x += take;
            if (w > 0) { r++; x = 0; }
          }
          x += GAP;
          segX.push(pieces);
        }
      };
      // The estimate above ignores the ends of rows and the 3 px a small segment takes at least: many small segments
      // (a list of 255) spilled past the last row, under the caption and out of the canvas. Coarser until they fit.
      place();
      for (let tries = 0; r >= rows && tries < 12; ++tries) { bpp *= 1.1 * (r + 1) / rows; place(); }
      const toXY = (k, byteOff) => {
        for (const p of segX[k]) {
          const bytesIn = p.w * bpp;
          if (byteOff <= p.b0 + bytesIn || p === segX[k][segX[k].length - 1])
            return { row: p.row, x: p.x + (byteOff - p.b0) / bpp };
        }
        return { row: 0, x: 0 };
      };
      // segments (cached but free = grey)
      const pool = data.blobs.seg_private_pool;
      for (let k = 0; k < segX.length; ++k)
        for (const p of segX[k]) {
          g.fillStyle = data.blobs.seg_expandable[k] ? (th.dark ? '#3a3f4b' : '#d9dde6') : (th.dark ? '#2c313b' : '#e7e9ee');
          g.fillRect(PAD + p.x, PAD + p.row * ROW_H, p.w, ROW_H - 4);
        }
      // A private pool's segments (a CUDA graph's or a MemPool's) framed in the accent colour, dashed: their free
      // memory is not free for other allocations.
      let pooled = 0;
      g.save();
      g.strokeStyle = th.accent;
      g.setLineDash([3, 2]);
      for (let k = 0; pool && k < segX.length; ++k) {
        if (!pool[k]) continue;
        ++pooled;
        for (const p of segX[k]) g.strokeRect(PAD + p.x + 0.5, PAD + p.row * ROW_H - 1.5, Math.max(1, p.w - 1), ROW_H - 1);
      }
      g.restore();
      canvas.dataset.privatePoolSegments = pooled;  // for the tests
      // blocks
      for (let i = 0; i < blk_seg.length; ++i) {
        const k = blk_seg[i];
        if (k === NO_ROW) continue;
        let off = blk_offset[i], left = blk_size[i];
        while (left > 0) {
          const a = toXY(k, off);
          const piece = segX[k].find((p) => p.row === a.row);
          const room = piece ? (piece.x + piece.w - a.x) * bpp : left;
          const take = Math.max(1, Math.min(left, room));
          const w = Math.max(1, take / bpp);
          const y = PAD + a.row * ROW_H;
          const key = blk_row[i] !== NO_ROW ? blk_row[i] : i + 7919;
          g.fillStyle = colour(key, th.dark, i === hover ? 1 : 0.9);
          g.fillRect(PAD + a.x, y, w, ROW_H - 4);
          if (blk_flags[i] & 1) {  // pending free: stripes
            g.fillStyle = th.bg;
            for (let sx = 0; sx < w; sx += 4) g.fillRect(PAD + a.x + sx, y, 1.5, ROW_H - 4);
          }
          if (blk_requested[i] < blk_size[i] && w > 6) {  // rounding waste as a darker tail
            const rw = Math.max(1, (blk_size[i] - blk_requested[i]) / bpp);
            g.fillStyle = 'rgba(0,0,0,0.25)';
            g.fillRect(PAD + a.x + w - Math.min(rw, w), y, Math.min(rw, w), ROW_H - 4);
          }
          if (i === hover) { g.strokeStyle = th.fg; g.strokeRect(PAD + a.x + 0.5, y + 0.5, w - 1, ROW_H - 5); }
          layout.push({ i, x: PAD + a.x, y, w, h: ROW_H - 4 });
          off += take;
          left -= take;
          if (!piece) break;
        }
      }
      g.fillStyle = th.muted;
      g.font = '11px system-ui, sans-serif';
      // Below the last row the layout can use (rows stop CAPTION px above the bottom).
      const captionY = Math.min(height - 4, PAD + (r + 1) * ROW_H + 12);
      const pools = data.body.private_pools || [];
      g.fillText(`${count(seg_size.length)} segments, ${count(blk_seg.length)} blocks · 1 px ≈ ${bytes(bpp)}` +
        (pools.length ? ` · dashed: private pool${pools.length > 1 ? 's' : ''} ` +
          pools.map((p) => `(${p.pool.join(', ')}) ${bytes(p.reserved_bytes)}`).join(', ') +
          ', free only for their own allocations' : ''), PAD, captionY);
      canvas.dataset.lastRowBottom = PAD + r * ROW_H + ROW_H - 4;  // for the tests: the caption's baseline is below it
      canvas.dataset.captionY = captionY;
      if (!painted) { painted = true; ctx.painted(); }
    }

    async function onMove(e) {
      if (!data) return;
      const r = canvas.getBoundingClientRect();
      const x = e.clientX - r.left, y = e.clientY - r.top;
      const hit = layout.find((p) => x >= p.x && x < p.x + Math.max(p.w, 2) && y >= p.y && y < p.y + p.h);
      const i = hit ? hit.i : -1;
      if (i === hover) return;
      hover = i;
      draw();
      showCard(i);
    }

    // The card of block i (none for -1): on a hover, and again when the search or the frame filter changes under it.
    let cardSeq = 0;
    async function showCard(i) {
      const my = ++cardSeq;  // a later card (another block, search or filter) replaces this one's late answer
      if (i < 0) { ctx.detail(null); return; }
      const row = data.blobs.blk_row[i];
      const sizeText = `${bytes(data.blobs.blk_size[i])} block, ${bytes(data.blobs.blk_requested[i])} requested`;
      if (row === NO_ROW) {
        ctx.detail(el('div', null, el('strong', { text: sizeText }),
          el('div', { class: 'fine', text: 'pending free; allocated before the trace (no stack recorded in the trace)' })));
        return;
      }
      const a = await ctx.call({ method: 'allocation', id: f.id, device, row });
      const hits = await frameHits(ctx.call, f, st.search).catch(() => null);  // too slow or failed: no marks
      if (hover !== i || my !== cardSeq || destroyed) return;
      ctx.detail(allocationCard(Object.assign(a.body, { block_size: data.blobs.blk_size[i] }),
        { filter: st.filterFrames, hits, timeFirst, win, timed: deviceTimed(f.info, device),
          onToggleFilter: () => ctx.set({ filterFrames: !st.filterFrames }) }));
    }

    function onKey(e) {
      if (e.target instanceof HTMLInputElement && e.target !== slider) return;
      const d = e.shiftKey ? 100 : 1;
      if (e.key === 'ArrowLeft') go(cur - d);
      else if (e.key === 'ArrowRight') go(cur + d);
      else if (e.key === 'Home') go(0);
      else if (e.key === 'End') go(steps - 1);
      else return;
      e.preventDefault();
    }

    async function start() {
      const ax = await ctx.call({ method: 'axis', id: f.id, device });
      steps = ax.body.step_count;
      timeFirst = ax.body.time_origin_us;
      slider.max = String(steps - 1);
      let initial = traced ? st.step : 0;
      if (initial === null || initial === undefined) {
        // Start where it matters: the peak of active memory. A step past the end is the end (go clamps), as in Flame.
        initial = (await ctx.call({ method: 'memoryviz', id: f.id, device, with_totals: false })).body.peak_step;
      }
      go(initial);
    }
    slider.addEventListener('input', () => go(Number(slider.value)));
    canvas.addEventListener('pointermove', onMove);
    canvas.addEventListener('pointerleave', () => { hover = -1; draw(); ctx.detail(null); });
    document.addEventListener('keydown', onKey);
    const stop = onResize(wrap, draw);
    start().catch((e) => ctx.fail(e));
    return {
      update(patch) { if (('search' in patch || 'filterFrames' in patch) && data && hover >= 0) showCard(hover); },
      destroy() { destroyed = true; document.removeEventListener('keydown', onKey); stop(); },
    };
  },
};
