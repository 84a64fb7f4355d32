// Peak: when active memory was highest, what was alive then by category, by allocation site and by size, with
// links to the flame graph and the allocator state at that moment.
import { afterEvents, bytes, count, deviceTimed, el, micros, pageStep, windowOf } from '../format.js';
import { allocationCard } from '../detail.js';
import { knownHits } from '../search.js';
import { categoryBar, markSearch, rowFrames, siteText, card } from './widgets.js';

export default {
  id: 'peak',
  title: 'Peak',
  key: '5',
  // Without a trace, the one state the snapshot holds: its segments' live blocks (fromSegments, app.js).
  available: (st) => st.files.length > 0 && st.files[st.file].info.devices.some((d) => d.events > 0 || d.segments > 0),
  perDevice: true,
  fromSegments: true,
  detail: true,
  mount(root, ctx) {
    const f = ctx.file();
    const device = ctx.device();
    const searchNote = el('p', { class: 'fine peak-search' });
    let detailCard = null;  // the stack a click on a largest allocation opened, marked with the rest
    const search = markSearch(ctx, f, searchNote, () => [root, detailCard]);
    let drawn = false;
    (async () => {
      const p = (await ctx.call({ method: 'peak', id: f.id, device, top: 25 })).body;
      const ax = (await ctx.call({ method: 'axis', id: f.id, device })).body;
      // time_us is null where the trace records no times (PyTorch 2.0 and 2.1).
      const when = (us) => (us === null || us === undefined ? ' (no times recorded)' : ` at +${micros(us - ax.time_origin_us)}`);
      // The answer's steps are the file's, as the CLI's (`peak --from A --to B`); the other views take the page's.
      const win = windowOf(f.info, device);
      const at = (step) => afterEvents(pageStep(step, win), undefined, win);
      // Without a trace there is one state, the snapshot's: what was alive then, not a peak over time (as the CLI says).
      const traced = ((f.info.devices.find((d) => d.device === device) || {}).events || 0) > 0;
      root.append(el('h2', { text: traced ? `Peak memory on ${ctx.deviceName(device)}` : `Memory alive on ${ctx.deviceName(device)} when the snapshot was taken` }), searchNote);
      if (!traced)
        root.append(el('p', { class: 'verdict', 'data-no-trace-peak': device }, 'No trace was recorded, so this is the one ' +
          'state the snapshot holds (its segments\' live blocks), not a peak over time.'));
      root.append(el('div', { class: 'cards' },
        // One vocabulary with the CLI (docs/analyses.md, "Words"): "peak allocated" at "step N", with its exact bytes.
        card(traced ? 'Peak allocated' : 'Allocated at the snapshot', bytes(p.allocated.bytes),
             `${count(p.allocated.bytes)} bytes requested by live tensors · ` +
             (traced ? `step ${count(p.allocated.step)}, ${at(p.allocated.step)}${when(p.allocated.time_us)}` : 'no trace recorded'),
             { 'data-peak-allocated': p.allocated.bytes, 'data-peak-step': p.allocated.step }),
        card('Reserved at that moment', bytes(p.allocated.reserved_then), 'held by the allocator at the allocated peak (the State view splits it: blocks, free, rounding)'),
        card(traced ? 'Peak reserved' : 'Reserved at the snapshot', bytes(p.reserved.bytes),
             traced ? `step ${count(p.reserved.step)}, ${at(p.reserved.step)}${when(p.reserved.time_us)}` : 'the segments the snapshot lists',
             { 'data-peak-reserved': p.reserved.bytes }),
        card('Alive at the peak', count(p.alive), 'allocations')));
      root.append(el('div', { class: 'toolbar' },
        el('button', { type: 'button', onclick: () => ctx.go('flame', { step: pageStep(p.allocated.step, win) }) }, 'Flame graph at the peak'),
        el('button', { type: 'button', onclick: () => ctx.go('state', { step: pageStep(p.allocated.step, win) }) }, 'Allocator state at the peak')));
      if (p.categories) {
        root.append(el('h3', { text: 'What it was, by category' }), categoryBar(p.categories, p.allocated.bytes));
        root.append(el('p', { class: 'fine', text: 'Categories are inferred from each allocation\'s stack and lifetime (see docs/analyses.md).' }));
      }
      const sites = el('table', { class: 'table' }, el('tr', null, el('th', { text: 'site (deepest user frame)' }),
        el('th', { class: 'num', text: 'bytes' }), el('th', { class: 'num', text: 'share' }), el('th', { class: 'num', text: 'allocations' })));
      for (const s of p.sites)
        sites.append(el('tr', rowFrames(s), el('td', { class: 'mono', text: siteText(s) }),
          el('td', { class: 'num', text: bytes(s.bytes) }), el('td', { class: 'num', text: `${(100 * s.bytes / Math.max(1, p.allocated.bytes)).toFixed(1)}%` }),
          el('td', { class: 'num', text: count(s.count) })));
      root.append(el('h3', { text: 'By allocation site' }), sites);
      const largest = el('table', { class: 'table' }, el('tr', null, el('th', { class: 'num', text: 'size' }),
        el('th', { text: 'alive' }), el('th', { text: 'category' }), el('th', { text: 'allocated at' })));
      p.largest.forEach((a, i) => {
        const tr = el('tr', Object.assign({ class: 'clickable', title: 'show details' }, rowFrames(a)),
          el('td', { class: 'num', text: bytes(a.size) }),
          el('td', { class: 'fine', text: `events ${a.born_before_window ? 'before the window' : a.birth_step === 0 ? 'before trace' : count(a.birth_step - 1)} – ` +
                                          `${a.freed_after_window ? 'after the window' : a.death_step === null ? 'end' : count(a.death_step - 1)}` }),
          el('td', { text: a.category || '' }),
          el('td', { class: 'mono', text: siteText(a) }));
        tr.addEventListener('click', async () => {
          const d = (await ctx.call({ method: 'allocation', id: f.id, device, row: p.largest_rows[i] })).body;
          // The timeline's card (detail.js): the user's line first, forward_frames and FX nodes, the frame filter.
          detailCard = allocationCard(d, { filter: ctx.state.filterFrames, hits: knownHits(f, ctx.state.search),
            timed: deviceTimed(f.info, device), timeFirst: ax.time_origin_us, win });
          ctx.detail(detailCard);
          search();
        });
        largest.append(tr);
      });
      root.append(el('h3', { text: 'Largest allocations alive at the peak' }), largest);
      drawn = true;
      ctx.painted();
      search();
    })().catch((e) => ctx.fail(e));
    return { update(patch) { if ('search' in patch && drawn) search(); }, destroy() {} };
  },
};
