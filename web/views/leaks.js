// Leaks: does memory left behind by each iteration grow (a leak), which allocation sites grow, and which gradients
// stay alive across optimizer steps (held, not growing). Iterations come from optimizer annotations or the trace's
// repeating pattern.
import { bytes, count, el } from '../format.js';
import { lineChart, markSearch, rowFrames, siteText, stackList, sparkline } from './widgets.js';

// A sparkline's vertical scale, beside it: its lowest and highest value (the whole series is the cell's tooltip).
function sparkRange(values) {
  if (!values.length) return el('span');
  const lo = Math.min(...values), hi = Math.max(...values);
  return el('span', { class: 'fine spark-range', 'data-spark-range': `${lo},${hi}`, text: lo === hi ? bytes(hi) : `${bytes(lo)} – ${bytes(hi)}` });
}

// `unit` is what the boundaries are: 'iteration', or 'repeat' where they all run inside module forwards.
function groupTable(groups, kind, st, unit) {
  const t = el('table', { class: 'table' }, el('tr', null, el('th', { text: 'site' }), el('th', { text: 'category' }),
    el('th', { class: 'num', text: kind === 'held' ? 'held' : `growth / ${unit}` }),
    el('th', { class: 'num', text: 'allocations' }), el('th', { text: `alive at each ${unit}` })));
  for (const g of groups) {
    const frames = el('details', null, el('summary', { class: 'mono', text: siteText(g) }), stackList(g.frames, st, g.frame_ids));
    t.append(el('tr', rowFrames(g), el('td', null, frames), el('td', { text: g.category }),
      el('td', { class: 'num', text: bytes(g.bytes_per_iteration) }), el('td', { class: 'num', text: count(g.allocations) }),
      el('td', { title: g.alive_bytes.map(bytes).join(' → ') }, sparkline(g.alive_bytes, 140, 26), sparkRange(g.alive_bytes))));
  }
  return t;
}

export default {
  id: 'leaks',
  title: 'Leaks',
  key: '6',
  // Not on a window of a file: a trend over iterations needs them all, as `allocscope leaks` reads the file whole.
  available: (st) => st.files.length > 0 && !st.files[st.file].info.window && st.files[st.file].info.devices.some((d) => d.events > 0),
  perDevice: true,
  mount(root, ctx) {
    const f = ctx.file();
    const device = ctx.device();
    const searchNote = el('p', { class: 'fine leaks-search' });
    const search = markSearch(ctx, f, searchNote, () => [root]);
    let drawn = false;
    (async () => {
      const r = (await ctx.call({ method: 'leaks', id: f.id, device })).body;
      root.append(el('h2', { text: `Leaks and held memory on ${ctx.deviceName(device)}` }));
      const it = r.iterations;
      const n = it.boundaries.length;
      const repeatsOnly = r.forward_only || r.setup_only;
      const unit = repeatsOnly ? 'repeat' : 'iteration';
      const itText = it.source === 'annotations' ? `${count(n)} iterations found from the "${it.marker}" annotations`
        : r.forward_only ? `${count(n)} repeats of an allocation at ${it.marker}, all inside module forwards`
        : r.setup_only ? `${count(n)} repeats of an allocation at ${it.marker}, all building or moving the model's weights`
        : it.source === 'periodic' ? `${count(n)} iterations found from a repeating allocation at ${it.marker}`
        : 'no repeating iteration found';
      let verdict;
      const heldBytes = r.held.reduce((a, g) => a + g.bytes_per_iteration, 0);
      if (r.forward_only) {
        verdict = el('div', { class: 'verdict', 'data-leak': 'unjudged', 'data-reason': 'forward_only',
          text: `Leaks cannot be judged: all ${count(n)} repeats of ${it.marker} run inside module forwards (every allocation from the first to the last is made in one). They may be steps of one forward pass, whose activations its backward frees, or a loop that only calls the model.` +
            (r.growing.length ? ' What grows across them is listed below.' : '') });
      } else if (r.setup_only) {
        verdict = el('div', { class: 'verdict', 'data-leak': 'unjudged', 'data-reason': 'setup_only',
          text: `Leaks cannot be judged: all ${count(n)} repeats of ${it.marker} build or move the model's weights (every allocation from the first to the last is a parameter or buffer a module makes in its __init__, .cuda(), .to() or load_state_dict). They are its layers, not a loop's iterations.` });
      } else if (r.leak_suspected) {
        const g = r.growing[0];
        verdict = el('div', { class: 'verdict bad', 'data-leak': 'yes' },
          `Leak suspected: memory left after each iteration keeps growing. The largest growing site, `,
          el('code', { text: siteText(g) }), ` adds ${bytes(g.bytes_per_iteration)} per iteration.`);
      } else if (it.source === 'none') {
        verdict = el('div', { class: 'verdict', 'data-leak': 'unjudged', 'data-reason': 'no_iterations', text: 'No repeating iteration found (no optimizer annotations, no periodic allocations): leaks cannot be judged.' });
      } else if (!r.judged) {
        verdict = el('div', { class: r.held.length ? 'verdict warn' : 'verdict', 'data-leak': 'unjudged', 'data-reason': 'too_few',
          text: `Too few iterations to judge leaks: ${count(n)}, and a trend needs ${count(r.boundaries_needed)} (record more ${it.source === 'annotations' ? 'optimizer steps' : 'iterations of the loop'}).` +
            (r.held.length ? ` ${bytes(heldBytes)} of gradients stay alive across optimizer steps.` : '') });
      } else if (r.pool_growth_suspected) {
        const p = r.pools_growing[0];
        verdict = el('div', { class: 'verdict bad', 'data-leak': 'pool' },
          `Growth: ${p.owner}'s pool reserves ${bytes(p.bytes_per_iteration)} more at every ${unit} start after warm-up. This capture sees the pool, not the tensors in it; a tensor kept alive each ${unit} grows it so.`,
          ...(p.sites.length ? [' Most at ', el('code', { text: siteText(p.sites[0]) }), '.'] : []));
      } else if (r.held.length) {
        verdict = el('div', { class: 'verdict warn', 'data-leak': 'held' },
          `No growth, but ${bytes(heldBytes)} of gradients stay alive across optimizer steps (zero_grad() missing, or with set_to_none=False?).`);
      } else if (r.released && r.released.length) {
        const g = r.released[0];
        verdict = el('div', { class: 'verdict warn', 'data-leak': 'released' }, 'No leak at the end: ',
          el('code', { text: siteText(g) }), ` grew by ${count(g.allocations)} allocation(s) over the ${unit}s, but the program freed most of it before the trace ended.`);
      } else if (r.library_reservations_left_out && !r.pools_judged) {
        verdict = el('div', { class: 'verdict', 'data-leak': 'no', 'data-reason': 'pools_not_judged', text: `No leak among the program's own allocations; the library pools' growth is not judged: ${count(n)} ${unit}s, too few to tell a pool's warm-up from growth.` });
      } else {
        verdict = el('div', { class: 'verdict', 'data-leak': 'no', text: 'No leak: what each iteration leaves behind does not grow.' });
      }
      root.append(verdict, el('p', { class: 'fine', text: itText + '.' }), searchNote);
      if (r.library_reservations_left_out)
        root.append(el('p', { class: 'fine', text: `${count(r.library_reservations_left_out)} allocation(s) reserved by a library's own pool (PyTorch's caching allocator, NCCL) are not judged here one by one, only as their pool: open PyTorch's own snapshot for its tensors.` }));
      if (r.total_at_boundary.length === 1) {
        root.append(el('p', { class: 'fine', text: `Active memory at the one ${unit} start: ${bytes(r.total_at_boundary[0])}.` }));
      } else if (r.total_at_boundary.length) {
        root.append(el('h3', { text: `Active memory at the start of each ${unit}` }),
          el('div', { title: r.total_at_boundary.map(bytes).join(' → ') }, lineChart(r.total_at_boundary, 480, 110, unit)),
          el('p', { class: 'fine', text: `${bytes(r.total_at_boundary[0])} → ${bytes(r.total_at_boundary[r.total_at_boundary.length - 1])}` }));
      }
      if (r.growing.length) root.append(el('h3', { text: repeatsOnly ? 'Growing across the repeats (not judged a leak)' : 'Growing sites' }), groupTable(r.growing, 'growing', ctx.state, unit));
      for (const p of r.pools_growing || [])
        if (p.sites.length) root.append(el('h3', { text: `Where ${p.owner}'s pool grew after warm-up` }), groupTable(p.sites, 'pool', ctx.state, unit));
      if (r.released && r.released.length) root.append(el('h3', { text: 'Grew, then freed before the trace ended' }), groupTable(r.released, 'released', ctx.state, unit));
      if (r.held.length) root.append(el('h3', { text: 'Held across optimizer steps' }), groupTable(r.held, 'held', ctx.state, unit));
      if (r.survivor_count.length) {
        const t = el('table', { class: 'table' }, el('tr', null, el('th', { text: unit }),
          el('th', { class: 'num', text: `outlived the next ${unit}` }), el('th', { class: 'num', text: 'bytes' })));
        r.survivor_count.forEach((c, i) => t.append(el('tr', null, el('td', { text: i === 0 ? 'prologue' : String(i) }),
          el('td', { class: 'num', text: count(c) }), el('td', { class: 'num', text: bytes(r.survivor_bytes[i]) }))));
        root.append(el('h3', { text: `Allocations that outlive their ${unit}` }), t);
      }
      drawn = true;
      ctx.painted();
      search();
    })().catch((e) => ctx.fail(e));
    return { update(patch) { if ('search' in patch && drawn) search(); }, destroy() {} };
  },
};
