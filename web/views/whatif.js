// What-if and plan: the peak at another batch size or sequence length and whether it fits a GPU (the same numbers as
// `allocscope whatif`, computed in the core), what to change so it fits (`allocscope plan`: each option with the line
// that applies it), the measured terms they rest on, and a chart of the measured total over the trace with the
// predicted one drawn faintly over it and the GPU's room as a line.
import { bytes, el, gpuProblem } from '../format.js';
import { fitCanvas, theme, onResize, byteTicks } from '../canvas.js';
import { card } from './widgets.js';

function slider(label, cls) {
  const input = el('input', { type: 'range', class: cls, min: '0.25', max: '8', step: '0.25', value: '1', 'aria-label': label });
  const value = el('span', { class: 'mono', text: '1x' });
  input.addEventListener('input', () => { value.textContent = `${input.value}x`; });
  return { input, value, node: el('label', null, `${label} `, input, ' ', value) };
}

// The core's verdict (whatif.h's Verdict): "unsure" where the GPU's room lies within the prediction's error, or the
// trace is incomplete (never "fits" then).
function fitsWord(r) {
  if (!r.gpu) return 'unknown';
  return r.verdict === 'fits' ? 'yes' : r.verdict === 'does not fit' ? 'no' : 'unsure';
}

function verdictText(r) {
  const on = `${r.gpu.label} (${bytes(r.gpu.total)})`;
  const range = `it needs ${bytes(r.predicted_needed)} (${bytes(r.needed_low)} to ${bytes(r.needed_high)} with this prediction's error)` +
    ` and the allocator has ${bytes(r.gpu.allocator_room)} beside the CUDA context`;
  if (r.verdict === 'fits') return `Fits on ${on}: ${range}.`;
  if (r.verdict === 'does not fit') return `Does not fit on ${on}: ${range}.`;
  const settles = r.trace_incomplete
    ? 'the trace is incomplete (see the notes below): a snapshot recorded over a whole iteration, from the first step, settles it'
    : "the GPU's room lies within the prediction's error: a snapshot recorded nearer the target settles it";
  return `Unsure on ${on}: ${range}; ${settles}.`;
}

function drawChart(canvas, measured, predicted, room) {
  const { ctx: g, width, height } = fitCanvas(canvas);
  const th = theme();
  g.clearRect(0, 0, width, height);
  const L = 70, R = 10, T = 10, B = height - 22, W = width - L - R;
  let max = 1;
  for (const v of measured) max = Math.max(max, v);
  for (const v of predicted) max = Math.max(max, v);
  if (room) max = Math.max(max, room);
  max *= 1.05;
  const y = (v) => B - (v / max) * (B - T);
  g.font = '11px system-ui, sans-serif';
  g.fillStyle = th.muted;
  g.strokeStyle = th.grid;
  g.lineWidth = 1;
  for (const t of byteTicks(max, 5)) {
    g.beginPath(); g.moveTo(L, y(t)); g.lineTo(L + W, y(t)); g.stroke();
    g.fillText(bytes(t), 4, y(t) + 4);
  }
  const line = (series, colour, alpha, width_) => {
    if (!series.length) return;
    g.globalAlpha = alpha;
    g.strokeStyle = colour;
    g.lineWidth = width_;
    g.beginPath();
    series.forEach((v, i) => {
      const x = L + (series.length === 1 ? 0 : (i / (series.length - 1)) * W);
      if (i) g.lineTo(x, y(v)); else g.moveTo(x, y(v));
    });
    g.stroke();
    g.globalAlpha = 1;
  };
  line(predicted, th.warn || th.accent, 0.45, 3);
  line(measured, th.accent, 1, 1.5);
  if (room) {
    g.setLineDash([6, 4]);
    g.strokeStyle = th.bad;
    g.lineWidth = 1.5;
    g.beginPath(); g.moveTo(L, y(room)); g.lineTo(L + W, y(room)); g.stroke();
    g.setLineDash([]);
    g.fillStyle = th.bad;
    g.fillText('GPU (after the CUDA context)', L + 6, y(room) - 4);
  }
  g.fillStyle = th.muted;
  g.fillText('steps →', L + W - 50, height - 6);
}

export default {
  id: 'whatif',
  title: 'What-if',  // and the plan: what to change so it fits
  key: 'w',
  // Not on pinned host memory: batch, sequence and the plan's changes scale a GPU's training memory.
  // Not on a window of a file (?from=&to=): a prediction needs the whole run, as `allocscope whatif` reads it whole.
  available: (st) => st.files.length > 0 && !st.files[st.file].info.host_of && !st.files[st.file].info.window &&
    st.files[st.file].info.devices.some((d) => d.events > 0),
  perDevice: true,
  mount(root, ctx) {
    const f = ctx.file();
    const device = ctx.device();
    const batch = slider('batch', 'batch-scale');
    const seq = slider('sequence length', 'seq-scale');
    const gpuInput = el('input', { type: 'text', class: 'gpu-input', placeholder: 'h100, a100-40gb, 24gb', 'aria-label': 'GPU', size: 18 });
    const gpuError = el('span', { class: 'muted' });
    const body = el('div');
    const planOut = el('div', { class: 'plan' });
    const canvas = el('canvas', { class: 'whatif-chart' });
    let series = { measured: [], predicted: [], room: 0 };
    root.append(el('h2', { text: `What if: cuda:${device}` }),
      el('p', { class: 'fine', text: 'Scale the batch or the sequence length of the recorded run: activations, inputs and the ' +
        'forward and backward temporaries grow; parameters, gradients and optimizer state do not. Reserved memory comes from a ' +
        'model of PyTorch\'s caching allocator. One snapshot sees sequence length as linear (attention grows with its square): ' +
        'open two or more snapshots of the same job at different sizes together to fit across them here, or use `allocscope whatif A B`.' }),
      el('div', { class: 'toolbar' }, batch.node, seq.node, el('label', null, 'GPU ', gpuInput), gpuError),
      planOut, body, canvas);
    // The plan for the GPU typed (or, without one, for the GPU the file ran out of memory on, else what cuts most),
    // when asked: it predicts some thirty changed runs, seconds on a large file.
    let planNo = 0, planAsked = false;
    planOut.append(el('button', { type: 'button', 'data-plan': '', onclick: () => { planAsked = true; renderPlan().catch((e) => ctx.fail(e)); } },
      'Plan: what to change so it fits'));
    const renderPlan = async () => {
      const mine = ++planNo;
      const gpu = gpuInput.value.trim();
      let reply;
      try {
        reply = await ctx.call({ method: 'plan', id: f.id, device, gpu, top: 6 });
      } catch (e) {
        if (mine === planNo) planOut.replaceChildren();  // an unreadable GPU is said beside the field already
        return;
      }
      if (mine !== planNo) return;
      const p = reply.body;
      const head = p.gpu
        ? `Plan for ${p.gpu.label} (${bytes(p.gpu.allocator_room)} for the allocator): as recorded it needs ${bytes(p.recorded.predicted_needed)}` +
          ` (${p.recorded.verdict}). ` +
          (p.incomplete_trace && p.recorded.needed_high <= p.gpu.allocator_room
            ? 'As far as the trace shows it fits; the trace cannot show all the run holds (see the notes). ' : '') +
          (!p.options.length ? (p.tried ? 'Nothing tried helps.' : '')
            : p.options[0].verdict === 'fits'
              ? (p.recorded.verdict === 'fits' ? 'It fits as recorded; what cuts it further, cheapest first:'
                                               : 'What to change so it fits, cheapest first:')
              : p.incomplete_trace ? 'What cuts it, cheapest first (none fits surely: see the notes):'
                                   : 'Nothing tried fits surely; closest first:')
        : `Plan: as recorded it needs ${bytes(p.recorded.predicted_needed)}; ` +
          (p.options.length ? 'the changes that cut it most, cheapest first (type a GPU to plan for it):'
                            : p.tried ? 'nothing tried cuts it by 1% or more.' : 'nothing to predict from (see the notes).');
      const table = el('table', { class: 'table plan-options' }, el('tr', null,
        ...['', 'kind', 'change', 'needs', 'verdict', 'spare / cut'].map((h) => el('th', { text: h }))));
      p.options.forEach((o, i) => {
        const flags = [...o.changes, ...(o.batch_scale !== 1 ? [`--batch ${o.batch_scale}`] : [])].join(' ');
        const what = o.code.length ? o.code.join('; ') : `the batch at ${o.batch_scale}x the recorded one`;
        table.append(el('tr', { 'data-plan-option': String(i), 'data-plan-flags': flags, title: o.effects.map((e) => `${e.change}: ${e.effect}`).join('\n') },
          el('td', { class: 'num', text: String(i + 1) }), el('td', { text: o.cost }),
          el('td', null, el('code', { text: what }), el('div', { class: 'fine mono', text: `whatif ${flags}` })),
          el('td', { class: 'num', text: p.gpu ? `${bytes(o.predicted_needed)} (${bytes(o.needed_low)} to ${bytes(o.needed_high)})` : bytes(o.predicted_needed) }),
          el('td', { text: o.verdict || '' }),
          el('td', { class: 'num', text: `${Math.round(100 * o.margin)}%` })));
      });
      planOut.replaceChildren(el('h3', { text: 'Plan: what to change' }), el('p', { 'data-plan-head': '', text: head }), table,
        el('ul', { class: 'fine' }, ...p.notes.map((n) => el('li', { text: n }))));
    };
    let seqNo = 0;
    let fitAgain = () => Promise.resolve();  // set once the fit across files is on the page
    const render = async () => {
      const mine = ++seqNo;
      batch.value.textContent = `${batch.input.value}x`;
      seq.value.textContent = `${seq.input.value}x`;
      let reply, error = '';
      const gpu = gpuInput.value.trim();
      const ask = (g) => ctx.call({ method: 'whatif', id: f.id, device, batch: Number(batch.input.value), seq: Number(seq.input.value), gpu: g, points: 1000 });
      try {
        reply = await ask(gpu);
      } catch (e) {
        if (!gpu) throw e;
        // Not a GPU: said beside the field, and the answer is given without one. The verdict for the GPU typed
        // before stayed under the error (an audit).
        error = ` ${gpuProblem(e)}`;
        reply = await ask('');
      }
      if (mine !== seqNo) return;  // a newer slider position is on its way
      gpuError.textContent = error;
      const r = reply.body;
      const fits = fitsWord(r);
      const verdict = !r.gpu ? 'Type a GPU to see whether it fits.' : verdictText(r);
      const x = (v) => Number(v.toPrecision(4));
      const most = !r.gpu ? ''
        : r.max_batch_scale_sure > 0 ? ` The largest batch that fits is ${x(r.max_batch_scale_sure)}x to ${x(r.max_batch_scale)}x the recorded one (surely, and by the prediction itself).`
        : r.max_batch_scale > 0 ? ` The largest batch that fits is up to ${x(r.max_batch_scale)}x the recorded one by the prediction; none surely.`
        : ` Not even a thousandth of the recorded batch fits${r.seq_scale !== 1 ? ' at this sequence length' : ''}.`;
      body.replaceChildren(
        el('div', { class: `verdict ${fits === 'no' ? 'bad' : fits === 'unsure' ? 'warn' : ''}`, 'data-fits': fits, 'data-predicted-allocated': r.predicted_allocated, 'data-predicted-needed': r.predicted_needed,
          'data-predicted-reserved': r.predicted_reserved, text: verdict + most }),
        el('div', { class: 'cards' },
          // "In blocks": allocated bytes rounded up to the allocator's blocks (docs/analyses.md, "Words"); the Peak
          // view's "peak allocated" is the requested bytes, a little less.
          card('Peak in blocks, recorded', bytes(r.replayed_allocated), 'allocated, rounded up to the allocator\'s blocks, as the allocator model replays the recording'),
          card('Peak in blocks, predicted', bytes(r.predicted_allocated)),
          card('Peak reserved, recorded', bytes(r.measured_reserved), 'what the file\'s segments held at most'),
          card('Peak reserved, predicted', bytes(r.predicted_reserved)),
          card('Least memory it runs in (the allocator frees its cache when short)', bytes(r.predicted_needed)),
          card('Grows with the batch (at the peak)', bytes(r.scaled_bytes_at_peak))));
      const t = el('table', { class: 'table' }, el('tr', null, ...['phase', 'step', 'total', 'parameters', 'gradients', 'optimizer state',
        'activations', 'temporaries', 'other'].map((h, i) => el('th', { class: i ? 'num' : '', text: h }))));
      for (const x of r.terms)
        t.append(el('tr', null, el('td', { text: x.phase }), el('td', { class: 'num', text: String(x.step) }),
          ...[x.total, x.parameters, x.gradients, x.optimizer_state, x.activations, x.temporaries, x.other].map((v) => el('td', { class: 'num', text: bytes(v) }))));
      body.append(el('h3', { text: 'Measured terms (requested bytes)' }), t,
        el('ul', { class: 'fine' }, ...r.notes.map((n) => el('li', { text: n }))),
        el('h3', { text: 'Active memory over the trace: recorded (line) and predicted (faint)' }));
      // The scenario travels to the Active Memory Timeline, which draws it over the recording.
      ctx.set({ whatif: { file: f.id, device, batch: Number(batch.input.value), seq: Number(seq.input.value), gpu } }, { quiet: true });
      body.append(el('p', null, el('button', { type: 'button', 'data-show-on-timeline': '', onclick: () => ctx.go('timeline') },
        'Show on the Active Memory Timeline')));
      series = { measured: Array.from(reply.blobs.measured), predicted: Array.from(reply.blobs.predicted),
                 room: r.gpu ? r.gpu.allocator_room : 0 };
      drawChart(canvas, series.measured, series.predicted, series.room);
    };
    // With several files open: the fit across them (the CLI's `whatif A B ... --sizes ... --to-batch N`).
    const files = ctx.files();
    if (files.length >= 2) {
      const sizeInputs = files.map((x, i) => el('input', { type: 'number', min: '0', step: 'any', class: 'fit-size', 'data-file': String(i),
                                                           'aria-label': `size of ${x.name}`, size: 8 }));
      const target = el('input', { type: 'number', min: '0', step: 'any', class: 'fit-target', 'aria-label': 'size to predict', size: 8 });
      const out = el('div', { class: 'fit-result' });
      const table = el('table', { class: 'table' }, el('tr', null, el('th', { text: 'file' }), el('th', { text: 'recorded at (batch size or sequence length)' })));
      files.forEach((x, i) => table.append(el('tr', null, el('td', { class: 'mono', text: x.name }), el('td', null, sizeInputs[i]))));
      fitAgain = () => (out.childElementCount ? fit() : Promise.resolve());  // once fitted, a new GPU refits
      const fit = async () => {
        const sizes = sizeInputs.map((x) => Number(x.value));
        const gpu = gpuInput.value.trim();
        let reply;
        try {
          reply = await ctx.call({ method: 'whatif_fit', ids: files.map((x) => x.id), device, sizes, target: Number(target.value), gpu });
        } catch (e) {
          out.replaceChildren(el('p', { class: 'verdict bad', 'data-fit-error': '', text: gpuProblem(e) }));
          return;
        }
        const r = reply.body;
        const fits = fitsWord(r);
        const verdict = !r.gpu ? '' : ` ${verdictText(r)}`;
        out.replaceChildren(
          el('div', { class: `verdict ${fits === 'no' ? 'bad' : fits === 'unsure' ? 'warn' : ''}`, 'data-fit-fits': fits, 'data-fit-predicted-allocated': r.predicted_allocated,
            'data-fit-predicted-reserved': r.predicted_reserved, 'data-fit-pair': `${r.size_a},${r.size_b}`,
            text: `At ${r.target}: peak allocated ${bytes(r.predicted_allocated)}, reserved ${bytes(r.predicted_reserved)}, ` +
                  `runs in at least ${bytes(r.predicted_needed)} ` +
                  `(fitted on the runs at ${r.size_a} and ${r.size_b}).${verdict}` }),
          el('ul', { class: 'fine' },
            ...(r.checks || []).map((k) => el('li', { 'data-fit-check': '', text: `Check: from ${k.size_a} and ${k.size_b}, the run at ${k.size} ` +
              `reads ${bytes(k.predicted_allocated)} predicted, ${bytes(k.measured_allocated)} measured` +
              (k.measured_allocated ? ` (${(k.predicted_allocated / k.measured_allocated).toFixed(3)}).` : '.') })),
            ...r.notes.map((n) => el('li', { text: n }))));
      };
      root.append(el('h3', { text: 'From the open files: several runs of the same job at different sizes' }),
        el('p', { class: 'fine', text: 'Give the batch size (or sequence length) each file was recorded at and the size to predict. ' +
          'Each allocation is paired across the runs and its size fitted as c * size^k on the two runs nearest the target, which ' +
          'follows attention\'s square that one snapshot cannot see. The GPU above decides whether it fits.' }),
        table, el('div', { class: 'toolbar' }, el('label', null, 'predict the run at ', target), ' ',
                  el('button', { type: 'button', 'data-fit': '', onclick: () => fit().catch((e) => ctx.fail(e)) }, 'Fit')), out);
    }
    const rerender = () => render().catch((e) => ctx.fail(e));
    batch.input.addEventListener('change', rerender);
    seq.input.addEventListener('change', rerender);
    // The fit across files answers for the GPU too: it kept answering for the one typed before (an audit).
    gpuInput.addEventListener('change', () => {
      rerender();
      if (planAsked) renderPlan().catch((e) => ctx.fail(e));
      fitAgain().catch((e) => ctx.fail(e));
    });
    const off = onResize(canvas, () => drawChart(canvas, series.measured, series.predicted, series.room));
    render().then(() => ctx.painted()).catch((e) => ctx.fail(e));
    return { update() {}, destroy() { off(); } };
  },
};
