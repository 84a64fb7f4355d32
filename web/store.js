// The page's one state atom: what is loaded and what the user looks at. The URL hash mirrors the view state so a
// reload or a shared link comes back to the same place.
const listeners = new Set();

export const state = {
  files: [],        // {id, name, info} in drop order
  ranksFile: null,  // {name, report, base}: a file saved by `allocscope ranks --json`, shown without snapshots
  view: 'overview', // a view id (views/index.js)
  file: 0,          // index into files for single-file views
  device: null,     // device ordinal, null = first with events
  window: null,     // [t0, t1] on the current axis, null = everything
  axis: 'event',    // 'event' | 'time'
  pinned: null,     // pinned element description (view-specific)
  search: '',
  step: null,       // Allocator State History position
  filterFrames: true,
  whatif: null,     // {file, device, batch, seq, gpu}: the What-if view's scenario, drawn over the Active Memory Timeline
};

const HASH_KEYS = { view: 's', file: 'n', device: 'n', step: 'n', axis: 's', search: 's', window: 'w', filterFrames: 'b' };

// push: a new history entry (a change of view), so Back returns to the previous one; other changes replace it.
export function set(patch, { quiet = false, push = false } = {}) {
  Object.assign(state, patch);
  writeHash(push);
  if (!quiet) for (const f of listeners) f(state, patch);
}

// The snapshots the user opened, without the files of their pinned host memory (which the worker opens after them,
// info.host_of set): what Diff, Ranks and the default view count.
export function snapshotFiles(st) { return st.files.filter((f) => !f.info.host_of); }

export function subscribe(f) { listeners.add(f); return () => listeners.delete(f); }

// A window end as the hash writes it: 12 significant digits, except for the time axis's absolute microseconds
// (~1.8e15), which need all of theirs (12 digits moved each end by up to 5 ms and a deep zoom's two ends onto one).
const windowEnd = (x) => (Math.abs(x) < 1e9 ? +x.toPrecision(12) : x);

// The hash is KEY=VALUE pairs joined by '&', each value percent-encoded (a space as %20): not form encoding, in which
// a '+' is a space, so that a hand-written link's search "a+b" stays the regex a+b.
export function writeHash(push = false) {
  const parts = [];
  for (const [k, kind] of Object.entries(HASH_KEYS)) {
    const v = state[k];
    if (v === null || v === undefined || v === '') continue;
    const text = kind === 'w' ? v.map(windowEnd).join(',') : kind === 'b' ? (v ? '1' : '0') : String(v);
    parts.push(`${k}=${encodeURIComponent(text)}`);
  }
  const h = '#' + parts.join('&');
  if (location.hash === h) return;
  try {
    history[push ? 'pushState' : 'replaceState'](null, '', location.pathname + location.search + h);
  } catch (e) {
    // A page without a URL of its own (a notebook shows the viewer in an iframe's srcdoc, whose origin is opaque):
    // the state lives on without a link to it.
  }
}

function hashParams() {
  const p = new Map();
  for (const part of location.hash.slice(1).split('&')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    try { p.set(part.slice(0, eq), decodeURIComponent(part.slice(eq + 1))); } catch (e) { /* a malformed escape: left out */ }
  }
  return p;
}

export function readHash() {
  const p = hashParams();
  const patch = {};
  for (const [k, kind] of Object.entries(HASH_KEYS)) {
    if (!p.has(k)) continue;
    const v = p.get(k);
    // Files, devices and steps are counts: a link's negative or fractional one is left out (each view then starts
    // where it starts by itself), where Flame read -5 as its "peak" and State history as step 0.
    if (kind === 'n') { const n = Number(v); if (Number.isInteger(n) && n >= 0) patch[k] = n; }
    else if (kind === 'w') { const w = v.split(',').map(Number); if (w.length === 2 && w.every(Number.isFinite) && w[1] > w[0]) patch[k] = w; }
    else if (kind === 'b') patch[k] = v === '1';
    else patch[k] = v;
  }
  return patch;
}
