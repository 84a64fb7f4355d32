// Diff mode (two files): reserved and live memory side by side, the stacks whose live memory changed most, and the
// segments present in only one file (PyTorch's `compare` rule).
import { bytes, count, el, signedBytes } from '../format.js';
import { card } from './widgets.js';

export default {
  id: 'diff',
  title: 'Diff',
  key: '8',
  available: (st) => st.files.length === 2,
  mount(root, ctx) {
    const [a, b] = ctx.files();
    (async () => {
      const d = (await ctx.call({ method: 'diff', ids: [a.id, b.id], top: 60 })).body;
      root.append(el('h2', null, 'Diff: ', el('span', { class: 'mono', text: a.name }), ' → ', el('span', { class: 'mono', text: b.name })));
      root.append(el('div', { class: 'cards' },
        card('Reserved', `${bytes(d.reserved_a)} → ${bytes(d.reserved_b)}`, signedBytes(d.reserved_b - d.reserved_a), { 'data-diff-reserved': d.reserved_b - d.reserved_a }),
        card('Live (active blocks)', `${bytes(d.live_a)} → ${bytes(d.live_b)}`, signedBytes(d.live_b - d.live_a), { 'data-diff-live': d.live_b - d.live_a }),
        card('Segments only in A / only in B', `${count(d.segments_only_a.length)} / ${count(d.segments_only_b.length)}`)));
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
      ctx.painted();
    })().catch((e) => ctx.fail(e));
    return { update() {}, destroy() {} };
  },
};
