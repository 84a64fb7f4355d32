// Flame graph of live memory at one event (the peak by default, or the event picked in a timeline / state view):
// an icicle chart, outermost frame on top, widths in bytes; click zooms into a frame, hover tells its bytes.
import { afterEvents, bytes, count, deviceTimed, el, fileStep, lineText, pageStep, since, windowOf } from '../format.js';
import { fitCanvas, theme, colour, onResize } from '../canvas.js';
import { frameHits, isAddress, searchFailure } from '../search.js';

const ROW = 18;

export default {
  id: 'flame',
  title: 'Flame',
  long: 'Flame graph of live memory',
  key: '4',
  // Without a trace, the one state the snapshot holds: its segments' live blocks (fromSegments, app.js).
  available: (st) => st.files.length > 0 && st.files[st.file].info.devices.some((d) => d.events > 0 || d.segments > 0),
  perDevice: true,
  fromSegments: true,
  detail: true,
  mount(root, ctx) {
    const f = ctx.file();
    const device = ctx.device();
    const st = ctx.state;
    const win = windowOf(f.info, device);  // a window of the file: the step box takes and shows the file's steps
    const stepInput = el('input', { type: 'number', min: 0, step: 1, class: 'step-input', 'aria-label': 'event' });
    const filterBtn = el('button', { type: 'button', title: 'toggle the frame filter (f)' });
    const info = el('span', { class: 'fine' });
    const searchNote = el('span', { class: 'fine flame-search' });
    const wrap = el('div', { class: 'canvas-wrap flame-wrap' });
    const canvas = el('canvas', { 'aria-label': 'flame graph' });
    wrap.append(canvas);
    // Without a trace there is one moment to show, the snapshot's: no peak to go to, no event to pick.
    const traced = ((f.info.devices.find((d) => d.device === device) || {}).events || 0) > 0;
    root.append(el('div', { class: 'toolbar' },
      traced ? el('button', { type: 'button', onclick: () => load(-1) }, 'At peak') : null,
      traced ? el('label', null, 'at event ', stepInput) : null, filterBtn, info, searchNote), wrap);

    let data = null, children = null, focus = 0, layout = [], hover = -1, painted = false, destroyed = false;
    let hits = null;  // the search's frame ids (search.js), marked in the graph

    async function search() {
      const text = (st.search || '').trim();
      let found = null, note = '';
      try {
        found = await frameHits(ctx.call, f, text);
        if (!found && text && !isAddress(text)) note = 'invalid regular expression';
      } catch (e) { note = searchFailure(f, e); }
      if (destroyed || text !== (st.search || '').trim()) return;
      hits = found;
      searchNote.textContent = note ? ` · ${note}` : '';
      draw();
    }

    async function load(step) {
      try {
        data = await ctx.call({ method: 'flame', id: f.id, device, step, filter: st.filterFrames });
      } catch (e) { ctx.fail(e); return; }
      if (destroyed) return;
      const { parent, value } = data.blobs;
      children = Array.from({ length: parent.length }, () => []);
      for (let n = 1; n < parent.length; ++n) children[parent[n]].push(n);
      for (const c of children) c.sort((a, b) => value[b] - value[a]);
      focus = 0;
      stepInput.value = String(fileStep(data.body.step, win));
      filterBtn.textContent = st.filterFrames ? 'show all frames' : 'hide internals';
      info.textContent = !traced
        ? `${bytes(data.body.total)} in ${count(data.body.allocations)} live allocations when the snapshot was taken (no trace recorded)`
        : `${bytes(data.body.total)} in ${count(data.body.allocations)} live allocations ` +
          `${afterEvents(data.body.step, undefined, win)} (${since(data.body.time_us, data.body.time_origin_us, deviceTimed(f.info, device))})` +
          (data.body.step === data.body.peak_step ? ' — the peak' : '');
      info.dataset.total = data.body.total;
      // For the tests: the bytes of the "no stack" node under the root (0 when there is none).
      const noStack = data.body.labels.findIndex((l) => l[3] === -1 && l[0] === 'no stack');
      let noStackBytes = 0;
      for (const n of children[0]) if (data.blobs.label[n] === noStack) noStackBytes = value[n];
      info.dataset.noStack = noStackBytes;
      ctx.set({ step: data.body.step }, { quiet: true });
      draw();
    }

    function name(n) { return n === 0 ? 'all' : data.body.labels[data.blobs.label[n]][0]; }
    function where(n) { const l = data.body.labels[data.blobs.label[n]]; return `${l[1]}:${lineText(l[2])}`; }
    // The core's pseudo-frames (id -1): memory with no stack, or only frames the filter hides.
    function pseudo(n) { return n !== 0 && data.body.labels[data.blobs.label[n]][3] === -1; }
    const PSEUDO_WHY = {
      'no stack': 'No stack was recorded for these allocations: they were made before the history was recorded, ' +
        'or recorded with stacks=None / without Python frames.',
      'only frames the filter hides': 'Every frame of these stacks is one the frame filter hides (interpreter and ' +
        'dispatcher internals): press f to show all frames.',
    };

    function draw() {
      if (!data) return;
      const { ctx: g, width, height } = fitCanvas(canvas);
      const th = theme();
      g.clearRect(0, 0, width, height);
      const { value } = data.blobs;
      layout = [];
      // Ancestors of the focus span the full width.
      const chain = [];
      for (let n = focus; n !== 0xffffffff && n !== undefined; n = n === 0 ? undefined : data.blobs.parent[n]) chain.unshift(n);
      chain.forEach((n, d) => layout.push({ n, x: 0, w: width, d }));
      const base = chain.length - 1;
      const scale = width / Math.max(1, value[focus]);
      const walk = (n, x, d) => {
        let cx = x;
        for (const c of children[n]) {
          const w = value[c] * scale;
          if (w < 0.4) break;
          layout.push({ n: c, x: cx, w, d });
          if ((d + 1) * ROW < height) walk(c, cx, d + 1);
          cx += w;
        }
      };
      walk(focus, 0, base + 1);
      g.font = '12px system-ui, sans-serif';
      g.textBaseline = 'middle';
      for (const b of layout) {
        const y = b.d * ROW;
        if (y > height) continue;
        const hit = hits && b.n !== 0 && hits.has(data.body.labels[data.blobs.label[b.n]][3]);
        g.fillStyle = b.n === 0 || pseudo(b.n) ? (th.dark ? '#3a3f4b' : '#d9dde6')
          : colour(data.blobs.label[b.n] * 3 + 1, th.dark, hits && !hit ? 0.35 : 0.95);
        g.fillRect(b.x, y, Math.max(0.5, b.w - 0.5), ROW - 1);
        if (b.n === hover) { g.strokeStyle = th.fg; g.strokeRect(b.x + 0.5, y + 0.5, b.w - 1.5, ROW - 2); }
        if (b.w > 40) {
          g.save();
          g.beginPath();
          g.rect(b.x, y, b.w - 2, ROW);
          g.clip();
          g.fillStyle = th.dark ? '#f2f4f8' : '#111';
          g.fillText(`${name(b.n)} (${bytes(value[b.n])})`, b.x + 4, y + ROW / 2);
          g.restore();
        }
      }
      if (!painted) { painted = true; ctx.painted(); }
    }

    function at(e) {
      const r = canvas.getBoundingClientRect();
      const x = e.clientX - r.left, y = e.clientY - r.top;
      const b = layout.find((q) => x >= q.x && x < q.x + q.w && y >= q.d * ROW && y < (q.d + 1) * ROW);
      return b ? b.n : -1;
    }
    canvas.addEventListener('pointermove', (e) => {
      const n = at(e);
      if (n === hover) return;
      hover = n;
      draw();
      if (n < 0) { ctx.detail(null); return; }
      const v = data.blobs.value[n];
      ctx.detail(el('div', null, el('h4', { text: name(n) }),
        n && !pseudo(n) ? el('div', { class: 'mono', text: where(n) }) : null,
        pseudo(n) ? el('div', { class: 'fine', text: PSEUDO_WHY[name(n)] || '' }) : null,
        el('div', { text: `${bytes(v)} (${count(v)} bytes) · ${(100 * v / Math.max(1, data.body.total)).toFixed(1)}% of live memory` }),
        el('div', { class: 'fine', text: `${count(data.blobs.count[n])} allocations; ${bytes(data.blobs.self[n])} allocated directly here` })));
    });
    canvas.addEventListener('pointerleave', () => { hover = -1; draw(); ctx.detail(null); });
    canvas.addEventListener('click', (e) => { const n = at(e); if (n >= 0) { focus = n === focus ? 0 : n; draw(); } });
    stepInput.addEventListener('change', () => load(Math.max(0, pageStep(Number(stepInput.value), win))));
    filterBtn.addEventListener('click', () => ctx.set({ filterFrames: !st.filterFrames }));
    const stop = onResize(wrap, draw);
    load(!traced || st.step === null || st.step === undefined ? -1 : st.step);
    if (st.search) search();
    return {
      update(patch) {
        if ('filterFrames' in patch) load(data ? data.body.step : -1);
        if ('search' in patch) search();
      },
      destroy() { destroyed = true; stop(); },
    };
  },
};
