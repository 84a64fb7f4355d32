// OOM: for each out-of-memory event, the request against what the driver and the allocator had, the cause (the same
// decision as `allocscope oom`, made in the core) with what to do, and the largest live allocations.
import { bytes, count, el, eventName, gpuProblem, windowOf } from '../format.js';
import { card, markSearch, rowFrames, siteText, stackList } from './widgets.js';

export const CAUSES = {
  request_too_large: 'The request alone is larger than the GPU',
  held_outside: 'The GPU is held outside PyTorch',
  allocator_cap: 'A per-process cap refused it',
  fragmentation: 'Fragmentation',
  live_tensors: 'Live tensors fill the GPU',
};

export default {
  id: 'oom',
  title: 'OOM',
  key: '7',
  available: (st) => st.files.length > 0,
  mount(root, ctx) {
    const f = ctx.file();
    let gpu = '';  // what the user typed: a GPU name or size, as the CLI's --gpu
    const body = el('div');
    const gpuInput = el('input', { type: 'text', class: 'gpu-input', placeholder: 'h100, a100-40gb, 24gb, 79.18GiB',
      'aria-label': 'GPU', size: 22 });
    const gpuError = el('span', { class: 'muted' });
    const searchNote = el('p', { class: 'fine oom-search' });
    const search = markSearch(ctx, f, searchNote, () => [body]);
    let drawn = false;
    gpuInput.addEventListener('change', () => { gpu = gpuInput.value.trim(); render().then(search).catch((e) => ctx.fail(e)); });
    root.append(el('h2', { text: 'Out-of-memory events' }),
      el('div', { class: 'toolbar' }, el('label', null, 'GPU (the file does not record it; inferred when empty): ', gpuInput), gpuError),
      searchNote, body);
    const render = async () => {
      let reply, error = '';
      try {
        reply = await ctx.call({ method: 'ooms', id: f.id, gpu });
      } catch (e) {
        if (!gpu) throw e;
        // A GPU the core could not read: say so, and answer as with the field empty (the GPU inferred from the
        // file). The last answer stayed, for the GPU typed before, under the error (an audit).
        error = ` ${gpuProblem(e)} (answered with the GPU inferred from the file)`;
        reply = await ctx.call({ method: 'ooms', id: f.id, gpu: '' });
      }
      gpuError.textContent = error;
      const { ooms } = reply.body;
      body.replaceChildren();
      if (!ooms.length) {
        body.append(el('div', { class: 'verdict', 'data-ooms': 0, text: 'No out-of-memory event in this file.' }));
      }
      // The core explains a device's first and last OOMs when it has many (OomOptions::max_per_device).
      const shown = new Map();
      for (const o of ooms) shown.set(o.device, { here: (shown.get(o.device)?.here || 0) + 1, all: o.ooms_on_device });
      for (const [device, n] of shown) {
        if (n.all > n.here) {
          body.append(el('p', { class: 'fine', 'data-ooms-skipped': n.all - n.here,
            text: `cuda:${device} has ${count(n.all)} out-of-memory events: the first ${count(Math.floor(n.here / 2))} and the last ${count(n.here - Math.floor(n.here / 2))} are explained here.` }));
        }
      }
      for (const o of ooms) {
        body.append(el('div', { class: 'verdict bad', 'data-ooms': ooms.length, 'data-oom-cause': o.cause },
          el('strong', { text: `cuda:${o.device}: asked for ${bytes(o.requested)} (${count(o.requested)} bytes) at ${eventName(o.event, windowOf(f.info, o.device))}. ` }),
          el('strong', { text: `${CAUSES[o.cause] || o.cause}${o.cause_sure ? '' : ' (unsure)'}: ` }), o.advice));
        const gpuNote = !o.gpu_total ? 'larger than any GPU we know'
          : o.gpu_inferred ? `inferred: the smallest common GPU that holds these numbers, ${o.gpu_class}` : o.gpu_class;
        body.append(el('div', { class: 'cards' },
          card('Requested', bytes(o.requested), null, { 'data-oom-requested': o.requested }),
          card('Free on the device (driver)', bytes(o.device_free)),
          card('Reserved by the allocator', bytes(o.reserved)),
          card('Allocated (live blocks)', bytes(o.allocated), `${count(o.live_allocations)} allocations`),
          card('Cached, free', bytes(o.cached_free), `largest free block ${bytes(o.largest_free_block)}`),
          o.pending_free
            ? card('Pending free', bytes(o.pending_free), 'freed, waiting for another stream\'s queued work: neither allocated nor free',
                { 'data-oom-pending': o.pending_free })
            : null,
          o.usable_free !== o.cached_free
            ? card('Usable by this request', bytes(o.usable_free),
                `largest ${bytes(o.usable_largest_free_block)}: its stream and pool (${bytes(o.free_other_streams)} cached for other streams)`,
                { 'data-oom-usable': o.usable_free })
            : null,
          o.free_other_mempools
            ? card('In other memory pools', bytes(o.free_other_mempools),
                `largest ${bytes(o.largest_free_other_mempool)}: ${o.request_in_private_pool ? 'pools other than this request\'s' : 'private pools (CUDA graphs, MemPool), not this request\'s'}`,
                { 'data-oom-mempools': o.free_other_mempools })
            : null,
          card('GPU', o.gpu_total ? bytes(o.gpu_total) : '?', gpuNote),
          // Without a GPU size (larger than any we know) there is no "held outside" to give, as the CLI leaves it out.
          o.gpu_total ? card('Held outside PyTorch', `${o.gpu_inferred ? '≥ ' : ''}${bytes(o.held_outside)}`, 'GPU − reserved − driver free') : null,
          o.captured_outside ? card('Captured outside PyTorch', bytes(o.captured_outside.bytes),
            o.captured_outside.by_owner.map((w) => `${w.label} ${bytes(w.bytes)}`).join(', ')) : null,
          o.expandable_segments ? card('expandable_segments', 'on') : null));
        body.append(el('div', { class: 'toolbar' },
          el('button', { type: 'button', onclick: () => ctx.go('state', { device: o.device, step: o.event }) }, 'Allocator state just before'),
          el('button', { type: 'button', onclick: () => ctx.go('flame', { device: o.device, step: o.event }) }, 'Flame graph of live memory')));
        const t = el('table', { class: 'table' }, el('tr', null, el('th', { class: 'num', text: 'size' }), el('th', { text: 'allocated at' })));
        for (const a of o.largest_live)
          t.append(el('tr', rowFrames(a), el('td', { class: 'num', text: bytes(a.size) }),
            el('td', null, el('details', null, el('summary', { class: 'mono', text: siteText(a) }), stackList(a.frames, null, a.frame_ids)))));
        body.append(el('h3', { text: 'Largest live allocations when it failed' }), t);
      }
    };
    render().then(() => { drawn = true; ctx.painted(); search(); }).catch((e) => ctx.fail(e));
    return { update(patch) { if ('search' in patch && drawn) search(); }, destroy() {} };
  },
};
