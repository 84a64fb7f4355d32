// The detail card for an allocation (hover or pinned): size, address, lifetime, category and the full stack, with
// PyTorch's frame filter as a toggle and search hits marked. Snapshot strings only ever become text nodes.
import { bytes, count, el, eventName, lineText, micros } from './format.js';

// A frame as the search matches it, "file:line:name".
function frameText(f) { return `${f[1]}:${lineText(f[2])}:${f[0]}`; }

// a: allocation JSON from the bridge (allocation_json); opts: {pinned, filter, hits, timeFirst, win, onToggleFilter},
// where hits is the search's Set of frame ids (search.js knownHits) or null, timeFirst the time labels count from
// (an answer's time_origin_us) and win the device's window (format.js windowOf) or null.
export function allocationCard(a, opts) {
  const card = el('div', { class: 'alloc-card' });
  card.append(el('h4', null, `${bytes(a.size)} `, el('span', { class: 'fine', text: `(${count(a.size)} bytes)` }),
                 opts.pinned ? el('span', { class: 'fine', text: ' — pinned (Esc to unpin)' }) : null));
  const t = el('table', { class: 'table' });
  const row = (k, v) => t.append(el('tr', null, el('td', { class: 'fine', text: k }), el('td', { class: 'mono', text: v })));
  row('address', a.address);
  if (a.block_size && a.block_size !== a.size) row('block', `${bytes(a.block_size)} (allocator rounding ${bytes(a.block_size - a.size)})`);
  if (a.category) row('category', a.category);
  row('stream', String(a.stream));
  // opts.timed false: the trace records no times (PyTorch 2.0, 2.1), so none is shown.
  const rel = (us) => (opts.timeFirst !== undefined ? `+${micros(us - opts.timeFirst)}` : micros(us));
  const at = (us) => (opts.timed === false ? '' : ` at ${rel(us)}`);
  const seg = a.kind === 'segment';
  if (seg) row('expandable', a.expandable ? 'yes (mapped and unmapped in pieces)' : 'no');
  row(seg ? 'mapped' : 'allocated', a.origin === 'traced' ? `${eventName(a.birth_step - 1, opts.win)}${at(a.birth_us)}` : a.origin);
  row(seg ? 'released' : 'freed', a.death_us !== undefined ? `${eventName(a.death_step - 1, opts.win)}${at(a.death_us)}`
                                                         : seg ? 'still reserved at snapshot' : 'still alive at snapshot');
  if (a.compile_context) row('compile context', a.compile_context);
  if (a.user_metadata) row('user metadata', a.user_metadata);
  card.append(t);
  const frames = a.frames || [];
  const shown = opts.filter ? frames.filter((f) => f[3]) : frames;
  const head = el('div', { class: 'toolbar' }, el('strong', { text: 'Stack' }),
    el('span', { class: 'fine', text: `${shown.length} of ${frames.length} frames, innermost first` }));
  if (opts.onToggleFilter)
    head.append(el('button', { type: 'button', onclick: opts.onToggleFilter, title: 'toggle the frame filter (f)' },
      opts.filter ? 'show all frames' : 'hide internals'));
  // The line that made it first: the core's site (the one rule of frame_filter.h, as every answer names it), which a
  // context='all' stack puts behind a dozen allocator and dispatcher frames.
  const site = a.site !== undefined ? frames.find((f) => f[4] === a.site) : null;
  if (site) {
    card.insertBefore(el('div', { class: 'site-lead', 'data-site': `${site[1]}:${lineText(site[2])}` },
      el('span', { class: 'fine', text: a.site_user ? 'your code: ' : 'allocated at: ' }),
      el('span', { class: 'fn mono', text: site[0] }), el('span', { class: 'mono', text: `  ${site[1]}:${lineText(site[2])}` })),
      card.children[1]);
  }
  card.append(head);
  const pre = el('div', { class: 'stack' });
  if (!frames.length) pre.append(el('div', { class: 'fine', text: '(no frames recorded: enable stacks in _record_memory_history)' }));
  for (const f of frames) {
    // The loader's marker before forward_frames (PyTorch 2.13+: where a backward tensor's forward op ran).
    if (f[1] === '<forward pass>') {
      pre.append(el('div', { class: 'forward-head', 'data-forward-frames': '' }, 'forward pass: where this tensor\'s forward op ran'));
      continue;
    }
    if (opts.filter && !f[3] && f !== site) continue;
    const mine = f === site;
    const line = el('div', null, mine ? el('span', { class: 'site-mark', text: '▶ ' }) : null,
      el('span', { class: 'fn', text: f[0] }), el('span', { class: 'fine', text: `  ${f[1]}:${lineText(f[2])}` }));
    // A torch.compile'd frame (PyTorch 2.13+): its FX node and the model code it came from, under it.
    if (f[5]) line.append(el('div', { class: 'fx', 'data-fx': '', text: `FX ${f[5]}` }));
    line.title = frameText(f);
    line.dataset.frame = String(f[4]);  // the answer views' markSearch marks lines by frame id, as this card does
    const classes = [];
    if (opts.hits && opts.hits.has(f[4])) classes.push('hit');
    if (mine) classes.push('site');
    line.className = classes.join(' ');
    pre.append(line);
  }
  card.append(pre);
  return card;
}
