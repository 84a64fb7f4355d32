// Overview: what the file holds (PyTorch's own counts: segments, reserved, allocated, active blocks, events) and
// where to look next. Its numbers carry data-value attributes with exact integers for the browser tests.
import { bytes, count, el, eventName, windowOf } from '../format.js';
import { siteText } from './widgets.js';
import { CAUSES } from './oom.js';

const FACTS = [
  ['total_reserved', 'Reserved by the allocator', bytes],
  ['total_allocated', 'Allocated (live tensors) at snapshot', bytes],
  ['segments', 'Segments', count],
  ['active_blocks', 'Active blocks', count],
];

// A file without trace events (history not recorded, or a bare list of segments): the views that need the trace are
// not offered, and this says why and how to record one.
function noTrace(f) {
  const what = f.info.has_device_traces
    ? 'this snapshot holds no allocation events (the history was not being recorded when it was taken)'
    : 'this file is a bare list of segments (what torch.cuda.memory_snapshot() returns), without the allocation history';
  const none = f.info.facts.segments === 0 ? ' It holds no segments either: nothing was allocated on the GPU when it was taken.' : '';
  return el('div', { class: 'verdict', 'data-empty': 'no-trace' },
    `No trace: ${what}. Only Overview and OOM apply; the timelines, state history, flame graph, peak and leaks need ` +
    `the trace, which torch.cuda.memory._record_memory_history() records and torch.cuda.memory._dump_snapshot() ` +
    `writes with the segments.${none}`);
}

// What happened at a device's out-of-memory events, in words (the OOM view's first answer: the request, the
// cause and what to do), with a way there; the summary's warning only said "see `allocscope oom`". Filled in when the
// core's `ooms` answer arrives.
function oomVerdict(d) {
  return el('div', { class: 'verdict bad', 'data-oom-summary': d.device },
    `cuda:${d.device} ran out of memory ${count(d.ooms)} time(s) — see OOM (7).`);
}

async function explainOoms(ctx, f, glance) {
  const { ooms } = (await ctx.call({ method: 'ooms', id: f.id, gpu: '' })).body;
  for (const box of glance.querySelectorAll('[data-oom-summary]')) {
    const device = Number(box.dataset.oomSummary);
    const mine = ooms.filter((o) => o.device === device);
    if (!mine.length) continue;
    const o = mine[0];
    box.replaceChildren(
      el('strong', { text: `cuda:${device} ran out of memory${mine.length > 1 ? ` ${count(o.ooms_on_device || mine.length)} times; the first` : ''}` +
        ` at ${eventName(o.event, windowOf(f.info, device))}, asking for ${bytes(o.requested)} with ${bytes(o.device_free)} free in the driver. ` }),
      el('strong', { text: `${CAUSES[o.cause] || o.cause}${o.cause_sure ? '' : ' (unsure)'}: ` }), o.advice || '', ' ',
      el('button', { type: 'button', onclick: () => ctx.go('oom') }, 'Open the OOM view'));
  }
}

export default {
  id: 'overview',
  title: 'Overview',
  key: '0',
  available: (st) => st.files.length > 0,
  mount(root, ctx) {
    function render() {
      root.replaceChildren();
      const f = ctx.file();
      const facts = f.info.facts;
      root.append(el('h2', { text: f.name }));
      const grid = el('div', { class: 'cards' });
      for (const [key, label, fmt] of FACTS) {
        grid.append(el('div', { class: 'card' },
          el('div', { class: 'card-value', 'data-fact': key, 'data-value': facts[key], title: `${count(facts[key])}` },
             fmt(facts[key])),
          el('div', { class: 'card-label', text: label })));
      }
      const events = facts.trace_events_per_device.reduce((a, b) => a + b, 0);
      grid.append(el('div', { class: 'card' },
        el('div', { class: 'card-value', 'data-fact': 'events', 'data-value': events }, count(events)),
        el('div', { class: 'card-label', text: f.info.window
          ? `trace events loaded: ${f.info.window} of the file's ${count(f.info.devices.reduce((n, d) => n + (d.window ? d.window.file_events : d.events), 0))}, with the allocations alive around it`
          : 'Trace events' })));
      root.append(grid);
      // Pinned host memory (record_pinned_host_memory=True, PyTorch 2.14): not GPU memory, so a row of its own.
      if (f.info.host) {
        const h = f.info.host;
        root.append(el('div', { class: 'cards', 'data-host': h.reserved_bytes },
          el('div', { class: 'card' }, el('div', { class: 'card-value', 'data-host-reserved': h.reserved_bytes }, bytes(h.reserved_bytes)),
            el('div', { class: 'card-label', text: `pinned host memory reserved (${count(h.segments)} host segments)` })),
          el('div', { class: 'card' }, el('div', { class: 'card-value', 'data-host-allocated': h.allocated_bytes }, bytes(h.allocated_bytes)),
            el('div', { class: 'card-label', text: `pinned host memory allocated at the snapshot (${count(h.events)} host trace events)` })),
          // Its own entry in the file selector, where every view answers it as it answers a GPU.
          h.file >= 0 ? el('button', { type: 'button', 'data-open-host': h.file,
            onclick: () => ctx.go(h.events ? 'timeline' : 'state', { file: h.file, device: 0, window: null, step: null }) },
            h.events ? 'Open its timeline' : 'Open its segments') : null));
      }
      if (!f.info.devices.some((d) => d.events > 0)) root.append(noTrace(f));
      const glance = el('div', { class: 'glance' }, el('p', { class: 'fine', text: 'Analysing…' }));
      root.append(glance);
      // The one-screen answer (peaks, leaks, OOMs, warnings) arrives after the counts have painted.
      ctx.call({ method: 'summary', id: f.id, top: 5 }).then(({ body }) => {
        glance.replaceChildren();
        for (const d of body.devices) {
          if (!d.events) continue;
          const notes = [];
          // reserved_known false: the file holds no segments for this device (unknown, not 0 B), as the CLI says.
          notes.push(`peak ${bytes(d.peak_allocated.bytes)} allocated, ${d.reserved_known === false ? 'reserved unknown (no segments for this device)' : `${bytes(d.peak_reserved.bytes)} reserved`}`);
          if (d.iterations) notes.push(`${count(d.iterations)} iterations`);
          if (d.forward_repeats) notes.push(`${count(d.forward_repeats)} repeats inside module forwards (not counted as iterations)`);
          if (d.setup_repeats) notes.push(`${count(d.setup_repeats)} repeats while the model's weights were built or moved (not counted as iterations)`);
          if (d.frees_without_alloc) notes.push(`${count(d.frees_without_alloc)} allocations began before the trace window`);
          notes.push(`fragmentation at the end ${(100 * d.final.fragmentation).toFixed(0)}% (largest free block ${bytes(d.final.largest_free_block)})`);
          // As the CLI says it: free memory in a CUDA graph's or MemPool's private pool serves only its own allocations.
          if (d.final.free_in_private_pools)
            notes.push(`${bytes(d.final.free_in_private_pools)} of the free memory is in private pools (a CUDA graph's or a MemPool's), for their own allocations only; the largest free block outside them is ${bytes(d.final.largest_free_block_outside_private_pools)}`);
          glance.append(el('h3', { text: ctx.deviceName(d.device) }), el('p', { text: notes.join(' · ') }));
          if (d.leak_suspected) glance.append(el('div', { class: 'verdict bad', text: `Leak suspected at ${d.leak_site} — see Leaks.` }));
          if (d.ooms) glance.append(oomVerdict(d));
          if (d.owners_at_peak && d.owners_at_peak.length) {
            // A capture of the whole process: who holds the device memory (the core's owner rule, owners.h).
            const t = el('table', { class: 'table', 'data-owners': d.device });
            for (const o of d.owners_at_peak) t.append(el('tr', { 'data-owner': o.owner, 'data-value': o.bytes },
              el('td', { class: 'num', text: bytes(o.bytes) }), el('td', { text: o.label })));
            glance.append(el('div', { class: 'fine', text: d.outside
              ? "Device memory at the peak by owner: PyTorch's reserved, and what allocscope's capture saw allocated outside PyTorch's allocator"
              : 'Reserved at the peak by owner (the allocator or library whose code reserved it)' }), t);
          }
          if (d.outside) {
            // A merged snapshot (`allocscope record` of a PyTorch job): the memory PyTorch never saw, apart from its own.
            const t = el('table', { class: 'table', 'data-outside-sites': d.device });
            for (const s of d.outside.sites_at_peak) t.append(el('tr', { 'data-value': s.bytes, 'data-owners': (s.owners || []).join(',') },
              el('td', { class: 'num', text: bytes(s.bytes) }), el('td', { class: 'mono', text: siteText(s) }),
              el('td', { class: 'fine', text: s.owners_label || '' })));
            glance.append(el('div', { class: 'fine', 'data-outside': d.outside.at_peak,
              text: `Outside PyTorch's allocator: ${bytes(d.outside.at_peak)} at the peak (${bytes(d.outside.peak)} at most), by site. ` +
                    "Not in PyTorch's allocated or reserved numbers, categories or leaks." }), t);
          }
          if (d.top_sites.length) {
            const t = el('table', { class: 'table' });
            for (const s of d.top_sites) t.append(el('tr', null, el('td', { class: 'num', text: bytes(s.bytes) }),
              el('td', { class: 'mono', text: siteText(s) })));
            glance.append(el('div', { class: 'fine', text: 'Largest allocation sites at the peak' }), t);
          }
        }
        if (body.devices.some((d) => d.ooms)) explainOoms(ctx, f, glance).catch(() => {});  // the count stays if it fails
        if (body.warnings.length) {
          const u = el('ul');
          for (const w of body.warnings) u.append(el('li', { text: w }));
          glance.append(el('h3', { text: 'Warnings about this file' }), u);
        }
      }).catch((e) => { glance.replaceChildren(el('p', { class: 'fine', text: `summary unavailable: ${e.message}` })); });

      const devs = el('table', { class: 'table' },
        el('thead', null, el('tr', null, el('th', { text: 'device' }), el('th', { text: 'events' }),
                             el('th', { text: 'segments' }), el('th', { text: 'reserved' }))));
      const tb = el('tbody');
      for (const d of f.info.devices)
        tb.append(el('tr', null, el('td', { text: d.device }),
          el('td', { 'data-device-events': d.device, 'data-value': d.events, text: count(d.events) }),
          el('td', { 'data-device-segments': d.device, 'data-value': d.segments, text: count(d.segments) }),
          el('td', { text: bytes(d.reserved_bytes) })));
      devs.append(tb);
      root.append(el('h3', { text: 'Devices' }), devs);

      const acts = el('table', { class: 'table' });
      for (const [name, n] of Object.entries(facts.actions))
        acts.append(el('tr', null, el('td', { text: name }),
          el('td', { 'data-action': name, 'data-value': n, text: count(n) })));
      root.append(el('h3', { text: 'Trace actions' }), acts);

      if (f.info.annotations.length)
        root.append(el('p', { text: `${count(f.info.annotations.length)} external annotations (drawn as ranges on the timelines).` }));
      if (f.info.allocator_settings.length) {
        const st = el('table', { class: 'table' });
        for (const [k, v] of f.info.allocator_settings) st.append(el('tr', null, el('td', { text: k }), el('td', { text: v })));
        root.append(el('h3', { text: 'Allocator settings' }), st);
      }
      if (f.info.unknown_keys.length || f.info.unknown_actions.length) {
        const u = el('ul');
        for (const [k, n] of f.info.unknown_keys) u.append(el('li', { text: `key '${k}' × ${count(n)} (kept, not modelled)` }));
        for (const a of f.info.unknown_actions) u.append(el('li', { text: `action '${a}' (counted as unknown)` }));
        root.append(el('h3', { text: 'Not modelled' }), u);
      }
      root.append(el('p', { class: 'fine', text:
        `Pickle ${bytes(f.info.source_bytes)} → model ${bytes(f.info.model_bytes)} in memory; ` +
        `${count(f.info.frames)} distinct frames, ${count(f.info.stacks)} distinct stacks.` }));
      ctx.painted();
    }
    render();
    return { update(patch) { if ('file' in patch) render(); }, destroy() {} };
  },
};
