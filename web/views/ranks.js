// Ranks mode: one row per rank of a job (N snapshots opened together, or a file saved by `allocscope ranks --json`):
// peaks and final state on the device each rank used, outliers first (the core's rule, ranks.h: modified z-score
// above 3.5 and 5% from the median), and what each outlier holds at its peak that the other ranks do not. A row
// opens that rank's snapshot.
import { bytes, count, el, signedBytes } from '../format.js';
import { snapshotFiles } from '../store.js';

const MEASURES = [['peak_allocated', 'peak allocated'], ['peak_reserved', 'peak reserved'],
                  ['final_allocated', 'final allocated'], ['final_reserved', 'final reserved']];

function pct(v, m) { return m > 0 ? `${v >= m ? '+' : ''}${Math.round((100 * (v - m)) / m)}%` : ''; }

function who(x) { return x.rank >= 0 ? `rank ${x.rank} (${x.name})` : x.name; }

// What an outlier stands out on and what it holds, as text nodes (site names come from the files).
function outlierNote(x, r) {
  const on = MEASURES.filter(([k]) => x['outlier_' + k])
    .map(([k, l]) => `${l} ${bytes(x[k])} (${pct(x[k], r.median[k])})`).join(', ');
  const li = el('li', { 'data-outlier-rank': x.rank },
    el('span', { class: 'mono', text: who(x) }), ` on cuda:${x.device}: ${on}.`);
  const sites = el('ul');
  for (const s of x.holds_more || []) sites.append(el('li', null, `holds ${s.at_least ? 'at least ' : ''}${signedBytes(s.bytes)} more at `, el('span', { class: 'mono', text: s.site })));
  for (const s of x.holds_less || []) sites.append(el('li', null, `holds ${bytes(s.bytes)} less at `, el('span', { class: 'mono', text: s.site })));
  // The core fills the sites only for an outlier on its allocated peak, and says why otherwise (ranks.h RankWhy:
  // which way it differs decides it); this only words it. A file saved before `why` existed gets no explanation.
  const peakSaid = x.events === 0 ? 'it has no trace, so its peaks were not compared' : 'its allocated peak is typical';
  const when = x.events === 0 ? 'at the end' : 'after its peak';
  const diffHint = x.compare_with ? ` (diff its end against ${x.compare_with})`
    : ' (its snapshot opened beside a typical rank\'s, the Diff view lists what)';
  const why = {
    keeps_more: `${peakSaid}: it keeps more ${when}${diffHint}.`,
    keeps_less: `${peakSaid}: it keeps less ${when}${diffHint}.`,
    caches_more: 'its allocated memory is typical: the difference is reserved but not allocated, memory the caching allocator keeps cached (the State view shows its segments).',
    reserves_less: 'its allocated memory is typical: it reserves less than the others, whose caching allocators keep more cached than it does (the State view of a typical rank shows its segments).',
  };
  if (!sites.children.length) {
    const text = x.outlier_peak_allocated
      ? 'no site at its peak differs by a tenth of that: the difference is spread over many sites, or past its top ones (the Peak view lists them all).'
      : why[x.why];
    if (text) sites.append(el('li', { class: 'fine', text }));
  }
  li.append(sites);
  return li;
}

export default {
  id: 'ranks',
  title: 'Ranks',
  key: '9',
  available: (st) => snapshotFiles(st).length >= 2 || !!st.ranksFile,
  mount(root, ctx) {
    const saved = ctx.state.ranksFile;
    const files = ctx.files();
    (async () => {
      const r = saved ? saved.report : (await ctx.call({ method: 'ranks', ids: files.map((f) => f.id) })).body;
      const rows = r.rows;
      root.append(el('h2', { text: `Ranks: ${count(rows.length)} ${saved ? `in ${saved.name}` : 'files'}` }));
      const out = rows.filter((x) => x.outlier);
      root.append(el('div', { class: out.length ? 'verdict bad' : 'verdict', 'data-outliers': out.length },
        out.length ? `${out.length} outlier${out.length > 1 ? 's' : ''} (marked in red, listed first): ${out.map(who).slice(0, 5).join(', ')}` +
          `${out.length > 5 ? ', …' : ''}.`
          : !r.enough ? 'Fewer than three readable ranks: telling which one is the outlier needs three or more (the Diff view compares two).'
          : r.compared && r.compared.peak_allocated === false
            ? 'No outlier on the final state; their peaks were not compared: fewer than three ranks have a trace.'
            : 'No outlier: the ranks use memory alike.'));
      if (out.length) root.append(el('ul', { class: 'outliers' }, ...out.slice(0, 20).map((x) => outlierNote(x, r))));
      // One job's rank twice, or two jobs in one folder (a saved file may say anything: shown as text, checked).
      for (const same of (Array.isArray(r.same_rank) ? r.same_rank : []).slice(0, 5)) {
        const names = Array.isArray(same && same.files) ? same.files.map(String) : [];
        root.append(el('p', { class: 'verdict bad', 'data-same-rank': String(same && same.rank),
          text: `Rank ${same && same.rank} is in ${names.length} files (${names.join(', ')}): each is compared as a rank of its own.` }));
      }
      root.append(el('p', { class: 'fine', text: `${r.rule ? r.rule.text : ''}. ${saved ? 'Click a row to open that rank\'s snapshot.' : 'Click a row to open its timeline.'}` }));
      const status = el('p', { class: 'fine', 'data-rank-status': '' });
      root.append(status);
      const max = Math.max(1, ...rows.map((x) => x.peak_reserved || 0));
      const t = el('table', { class: 'table' });
      t.append(el('tr', null, el('th', { class: 'num', text: 'rank' }), el('th', { text: 'file' }), el('th', { text: 'device' }),
        ...MEASURES.map(([, l]) => el('th', { class: 'num', text: l })), el('th', { text: 'peak' }),
        el('th', { class: 'num', text: 'events' }), el('th', { text: 'notes' })));
      rows.forEach((x, i) => {
        const tr = el('tr', { class: (x.outlier ? 'outlier ' : '') + 'clickable', 'data-rank-row': i, title: 'open this rank' },
          el('td', { class: 'num', text: x.rank >= 0 ? x.rank : '–' }), el('td', { class: 'mono', text: x.name }));
        if (x.error) {
          tr.append(el('td'), el('td', { colspan: MEASURES.length + 2, class: 'bad', text: `unreadable: ${x.error}` }));
          t.append(tr);
          return;
        }
        const bar = el('div', { class: 'bar' });
        bar.style.width = `${(120 * (x.peak_allocated || 0)) / max}px`;
        bar.style.left = '0';
        bar.style.background = x.outlier ? 'var(--bad)' : 'var(--accent)';
        tr.append(el('td', { text: `cuda:${x.device}` }),
          // a rank without a trace has no peaks (null): only the state its snapshot holds
          ...MEASURES.map(([k]) => el('td', { class: 'num' + (x['outlier_' + k] ? ' bad' : ''), text: x[k] === null ? 'no trace' : bytes(x[k]) })),
          el('td', { class: 'bar-cell' }, bar), el('td', { class: 'num', text: count(x.events) }),
          el('td', { text: [x.ooms ? `${x.ooms} OOM` : '', x.leak_suspected ? 'leak suspected' : ''].filter(Boolean).join(', ') }));
        tr.addEventListener('click', () => {
          if (!saved) { ctx.go('timeline', { file: x.index, device: x.device, window: null }); return; }
          status.textContent = `Opening ${x.name}…`;
          ctx.openRank(x).then((how) => { if (how === 'pick') status.textContent = `Choose ${x.name.split('/').pop()} in the file dialog: a page cannot open a path on your disk by itself.`; })
            .catch((e) => { status.textContent = `Could not open ${x.name}: ${e.message || e}`; });
        });
        t.append(tr);
      });
      t.append(el('tr', null, el('td'), el('td', { class: 'fine', text: 'median' }), el('td'),
        ...MEASURES.map(([k]) => el('td', { class: 'num fine', text: bytes(r.median[k]) }))));
      root.append(t);
      ctx.painted();
    })().catch((e) => ctx.fail(e));
    return { update() {}, destroy() {} };
  },
};
