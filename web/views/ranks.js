// Ranks mode (N files, e.g. one per GPU of a distributed job): one row per file with its peaks and final state; a
// rank far from the others (median absolute deviation test, done by the core) is marked.
import { bytes, count, el } from '../format.js';

const MEASURES = [['peak_allocated', 'peak allocated'], ['peak_reserved', 'peak reserved'],
                  ['final_allocated', 'final allocated'], ['final_reserved', 'final reserved']];

export default {
  id: 'ranks',
  title: 'Ranks',
  key: '9',
  available: (st) => st.files.length >= 2,
  mount(root, ctx) {
    const files = ctx.files();
    (async () => {
      const r = (await ctx.call({ method: 'ranks', ids: files.map((f) => f.id) })).body;
      root.append(el('h2', { text: `Ranks: ${files.length} files` }));
      const out = r.rows.filter((x) => x.outlier);
      root.append(el('div', { class: out.length ? 'verdict bad' : 'verdict', 'data-outliers': out.length },
        out.length ? `Outlier: ${out.map((x) => x.name).join(', ')} (marked in red) differs from the other ranks.`
          : files.length < 3 ? 'Two files: telling which one is the outlier needs three or more ranks (the Diff view compares two).'
          : 'No outlier: the ranks use memory alike.'));
      const max = Math.max(1, ...r.rows.map((x) => x.peak_reserved));
      const t = el('table', { class: 'table' });
      t.append(el('tr', null, el('th', { text: 'file' }), el('th', { text: 'device' }),
        ...MEASURES.map(([, l]) => el('th', { class: 'num', text: l })), el('th', { text: 'peak' }),
        el('th', { class: 'num', text: 'events' }), el('th', { text: 'notes' })));
      r.rows.forEach((x, i) => {
        const bar = el('div', { class: 'bar' });
        bar.style.width = `${(120 * x.peak_allocated) / max}px`;
        bar.style.left = '0';
        bar.style.background = x.outlier ? 'var(--bad)' : 'var(--accent)';
        const tr = el('tr', { class: (x.outlier ? 'outlier ' : '') + 'clickable', 'data-rank-row': i, title: 'open this file' },
          el('td', { class: 'mono', text: x.name }), el('td', { text: `cuda:${x.device}` }),
          ...MEASURES.map(([k]) => el('td', { class: 'num' + (x['outlier_' + k] ? ' bad' : ''), text: bytes(x[k]) })),
          el('td', { class: 'bar-cell' }, bar), el('td', { class: 'num', text: count(x.events) }),
          el('td', { text: [x.ooms ? `${x.ooms} OOM` : '', x.leak_suspected ? 'leak suspected' : ''].filter(Boolean).join(', ') }));
        tr.addEventListener('click', () => ctx.go('timeline', { file: i, device: x.device, window: null }));
        t.append(tr);
      });
      t.append(el('tr', null, el('td', { class: 'fine', text: 'median' }), el('td'),
        ...MEASURES.map(([k]) => el('td', { class: 'num fine', text: bytes(r.median[k]) }))));
      root.append(t);
      ctx.painted();
    })().catch((e) => ctx.fail(e));
    return { update() {}, destroy() {} };
  },
};
