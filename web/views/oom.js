// OOM: for each out-of-memory event, the request against what the driver and the allocator had, whether it was
// fragmentation (enough cached free bytes, no block large enough), and the largest live allocations.
import { bytes, count, el, micros } from '../format.js';
import { card, stackList } from './widgets.js';

export default {
  id: 'oom',
  title: 'OOM',
  key: '7',
  available: (st) => st.files.length > 0,
  mount(root, ctx) {
    const f = ctx.file();
    (async () => {
      const { ooms } = (await ctx.call({ method: 'ooms', id: f.id })).body;
      root.append(el('h2', { text: 'Out-of-memory events' }));
      if (!ooms.length) {
        root.append(el('div', { class: 'verdict', 'data-ooms': 0, text: 'No out-of-memory event in this file.' }));
      }
      for (const o of ooms) {
        const why = o.fragmentation
          ? `Fragmentation: ${bytes(o.cached_free)} was free inside the allocator's segments, but the largest free block was ${bytes(o.largest_free_block)}.`
          : o.requested > o.device_free + o.cached_free
            ? `The request did not fit: the driver had ${bytes(o.device_free)} free and the allocator held ${bytes(o.cached_free)} free in its segments.`
            : 'The request was refused although free memory looks sufficient; see the allocator state just before it.';
        root.append(el('div', { class: 'verdict bad', 'data-ooms': ooms.length },
          el('strong', { text: `cuda:${o.device}: asked for ${bytes(o.requested)} (${count(o.requested)} bytes) at event ${count(o.event)}. ` }), why));
        root.append(el('div', { class: 'cards' },
          card('Requested', bytes(o.requested), null, { 'data-oom-requested': o.requested }),
          card('Free on the device (driver)', bytes(o.device_free)),
          card('Reserved by the allocator', bytes(o.reserved)),
          card('Allocated (live blocks)', bytes(o.allocated), `${count(o.live_allocations)} allocations`),
          card('Cached, free', bytes(o.cached_free), `largest free block ${bytes(o.largest_free_block)}`)));
        root.append(el('div', { class: 'toolbar' },
          el('button', { type: 'button', onclick: () => ctx.go('state', { device: o.device, step: o.event }) }, 'Allocator state just before'),
          el('button', { type: 'button', onclick: () => ctx.go('flame', { device: o.device, step: o.event }) }, 'Flame graph of live memory')));
        const t = el('table', { class: 'table' }, el('tr', null, el('th', { class: 'num', text: 'size' }), el('th', { text: 'allocated at' })));
        for (const a of o.largest_live)
          t.append(el('tr', null, el('td', { class: 'num', text: bytes(a.size) }),
            el('td', null, el('details', null, el('summary', { class: 'mono', text: a.frames[0] || '<no frames>' }), stackList(a.frames)))));
        root.append(el('h3', { text: 'Largest live allocations when it failed' }), t);
      }
      ctx.painted();
    })().catch((e) => ctx.fail(e));
    return { update() {}, destroy() {} };
  },
};
