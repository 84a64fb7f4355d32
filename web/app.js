// The viewer's shell: opening files (drop anywhere, picker, example, ?url=), progress and errors, the view tabs,
// file/device selectors, keyboard help and the <html data-state> automation hook. Views draw themselves.
import { openFiles, call, unload, warmUp } from './worker_client.js';
import { state, set, subscribe, readHash, writeHash, snapshotFiles } from './store.js';
import { views } from './views/index.js';
import { el, count, deviceName } from './format.js';
import { previewStart, drawPreview } from './preview.js';

const $ = (id) => document.getElementById(id);
const html = document.documentElement;

function setPageState(s) { html.dataset.state = s; }

function show(section) {
  for (const id of ['welcome', 'loading', 'error', 'view']) $(id).classList.toggle('hidden', id !== section);
  $('workspace').classList.toggle('hidden', section !== 'view');
  if (section !== 'view') $('detail').classList.add('hidden');
}

// The detail column's words while nothing is hovered or pinned: it keeps its place (the plot does not resize under
// the pointer when a card appears), and says what will appear there.
function detailPlaceholder() {
  return el('p', { class: 'detail-empty' }, 'Point at something in the view for its details here: size, life and ' +
    'the stack, your own line first. Click pins it; Esc unpins.');
}

// lost: the worker's core was restarted (an abort), so the files it held are gone and "back" goes to the start.
function showError(message, lost) {
  if (lost && state.files.length) {
    state.files = [];
    if (mounted) { try { mounted.destroy(); } catch (e) { console.error(e); } mounted = null; }
    $('tabs').replaceChildren();  // no view can run without its files
    for (const id of ['file-pick', 'device-pick', 'search', 'window-note']) $(id).classList.add('hidden');
  }
  $('error-message').textContent = message;  // never innerHTML: the message can quote the file
  show('error');
  setPageState('error');
}

// ---- opening files ----

// ?from=A&to=B (as `allocscope peak FILE --from A --to B`, and what `allocscope view --from A --to B` prints): every
// file this page opens, dropped or by URL, loads only that window of each device's trace, for a file too big to
// open whole. Steps, or times with a unit (10s, 200ms); the core parses them (one rule with the CLI).
const LOAD_WINDOW = (() => {
  // The offline report (`allocscope plot --from A --to B`, Python's inline viewer of a window) carries its own.
  if (globalThis.__allocscopeEmbed) return globalThis.__allocscopeEmbed.window || null;
  const q = new URLSearchParams(location.search);
  const from = q.get('from') || '', to = q.get('to') || '';
  return from || to ? { from, to } : null;
})();

const PHASE_WEIGHT = { load: [0, 1], read: [0, 0.3], inflate: [0, 0.4], parse: [0.4, 1] };

// A file saved by `allocscope ranks --json` (one row per rank of a job) opens the Ranks view by itself; its rows open
// the ranks' snapshots.
const RANKS_FILE_LIMIT = 256 << 20;

// A .json is a ranks report when it begins as `allocscope ranks --json` writes one ("kind" first); any other .json
// opens as a snapshot (a JSON snapshot, or the loader's error saying what the file is instead).
async function isRanksFile(list) {
  if (list.length !== 1 || !list[0].blob || !/\.json$/i.test(list[0].name)) return false;
  const head = await list[0].blob.slice(0, 256).text();
  return /^\s*\{\s*"kind"\s*:\s*"allocscope\.ranks"/.test(head);
}

async function openRanksFile(f) {
  if (f.blob.size > RANKS_FILE_LIMIT) throw new Error(`${f.name} is ${count(f.blob.size)} bytes: too large for a ranks file`);
  let report = null;
  try { report = JSON.parse(await f.blob.text()); } catch (e) { /* said below */ }
  if (!report || report.kind !== 'allocscope.ranks' || !Array.isArray(report.rows) || !report.median) {
    throw new Error(`${f.name} is neither a snapshot nor a file written by \`allocscope ranks --json\``);
  }
  if (state.files.length) unload(state.files.map((x) => x.id));
  state.files = [];
  state.ranksFile = { name: f.name, report, base: f.url || null };
  Object.assign(state, { file: 0, device: null, window: null, pinned: null, step: null, view: 'ranks' });
  writeHash();
  setupChrome();
  show('view');
  mountView();
}

// Opens a rank's snapshot named in the ranks file: from the same site when the ranks file came from one (its names
// are relative to where `allocscope ranks` ran; `allocscope view ranks.json` serves each at rows/NAME, the whole
// name one encoded segment so that './', '../', '#' and '%' stay part of it), else through the file dialog, since a
// page cannot read a path on the disk.
async function openRank(row) {
  const rf = state.ranksFile;
  if (rf && rf.base) {
    let list = null;
    // The name as a relative path (a static site holding the ranks file and the snapshots beside it, or `allocscope
    // view` for a plain name), then `allocscope view`'s rows/NAME, which serves any relative or absolute name.
    const urls = row.name.startsWith('/') ? [] : [row.name.split('/').map(encodeURIComponent).join('/')];
    urls.push(`rows/${encodeURIComponent(row.name)}`);
    for (const u of urls) {
      try { list = await fetchFiles([new URL(u, rf.base).href]); } catch (e) { list = null; }
      if (list) break;
    }
    if (list) { await open(list); return 'opened'; }
  }
  $('file-input').click();
  return 'pick';
}

// onTooLarge: called instead of showing the error when the tab ran out of memory on these files (start(): the
// server that gave them, `allocscope view`, can parse them itself).
async function open(list, onTooLarge) {
  if (!list.length) return;
  if (await isRanksFile(list)) {
    try { await openRanksFile(list[0]); } catch (e) { showError(e.message || String(e)); }
    return;
  }
  show('loading');
  setPageState('loading');
  previewStart();
  const names = list.map((f) => f.name).join(', ');
  $('loading-label').textContent = `Opening ${names}…`;
  $('progress').value = 0;
  try {
    const { ids, infos } = await openFiles(list, (p) => {
      if (p.phase === 'preview') { drawPreview(p); return; }
      const [a, b] = PHASE_WEIGHT[p.phase] || [0, 1];
      const frac = p.total ? p.done / p.total : 0;
      $('progress').value = (p.file + a + (b - a) * frac) / p.files;
      $('loading-label').textContent =
        `${p.phase === 'parse' ? 'Parsing' : p.phase === 'inflate' ? 'Inflating' : 'Loading'} ${p.name}` +
        (p.files > 1 ? ` (${p.file + 1} of ${p.files})` : '') + '…';
    }, LOAD_WINDOW);
    if (state.files.length) unload(state.files.map((f) => f.id));
    state.ranksFile = null;
    const files = ids.map((id, i) => ({ id, name: infos[i].name, info: infos[i] }));
    state.files = files;
    state.file = 0;
    applyState(hashState(defaultView()));
    setupChrome();
    show('view');
    mountView();
  } catch (e) {
    if (onTooLarge && e.lost && /too large for the browser's memory/.test(e.message || '')) onTooLarge(e);
    else showError(e.message || String(e), e.lost);
  }
}

// The view state a URL hash asks for, as a load reads it: keys it lacks take their defaults (view: `view`), and a
// file the page does not have is the first. One rule for a load and for a hash changed on an open page.
function hashState(view) {
  const patch = { file: 0, device: null, window: null, step: null, axis: 'event', search: '', filterFrames: true, view,
                  ...readHash() };
  if (!(patch.file >= 0 && patch.file < state.files.length)) patch.file = 0;
  return patch;
}

// Makes `patch` the state, with a view and device the file has (else the defaults), and the hash say so.
function applyState(patch) {
  Object.assign(state, patch, { pinned: null });
  if (!views.some((v) => v.id === state.view && v.available(state))) state.view = defaultView();
  if (!validDevice(state.device)) state.device = defaultDevice();
  writeHash();
}

// The view a file opens on, the most useful one for what it holds: the Active Memory Timeline where there is a trace
// (on the device that ran out of memory, with the OOM marked, when there was one: defaultDevice), the allocator's
// segment map where there are segments but no trace (torch.cuda.memory_snapshot(), a dump without history), else the
// Overview, which says why there is nothing to draw.
function defaultView() {
  const opened = snapshotFiles(state).length;
  if (opened > 2 && views.some((v) => v.id === 'ranks')) return 'ranks';
  if (opened === 2 && views.some((v) => v.id === 'diff')) return 'diff';
  for (const id of ['timeline', 'state']) {
    const v = views.find((x) => x.id === id);
    if (v && v.available(state)) return id;
  }
  return 'overview';
}

function currentFile() { return state.files[state.file] || state.files[0]; }

function devicesOf(f) { return f.info.devices; }
function validDevice(d) { return d !== null && devicesOf(currentFile()).some((x) => x.device === d); }
// The device that ran out of memory first, else the first with a trace, else the first with segments: a 4-GPU file
// that ran out on cuda:1 used to open on cuda:0.
function defaultDevice() {
  const ds = devicesOf(currentFile());
  const pick = ds.find((d) => d.ooms > 0 && d.events > 0) || ds.find((d) => d.events > 0) || ds.find((d) => d.segments > 0);
  return (pick || ds[0] || { device: 0 }).device;
}

function filesFromList(fileList) { return Array.from(fileList).map((f) => ({ name: f.name, blob: f })); }

async function fetchFiles(urls) {
  const out = [];
  for (const u of urls) {
    const url = new URL(u, location.href);
    // Same origin only: the page never talks to another host (the CSP's connect-src enforces it too).
    if (url.origin !== location.origin) throw new Error(`refusing to open ${u}: only files from this site can be opened by URL`);
    const r = await fetch(url);
    if (!r.ok) throw new Error(`could not fetch ${url.pathname}: HTTP ${r.status}`);
    // The last segment, decoded: a rank's rows/NAME may hold a whole path, so its own last part.
    const leaf = decodeURIComponent(url.pathname.split('/').pop() || '').split('/').pop();
    out.push({ name: leaf || 'snapshot', blob: await r.blob(), url: url.href });
  }
  return out;
}

// ---- chrome: tabs, selectors ----

function setupChrome() {
  const tabs = $('tabs');
  tabs.replaceChildren();
  const ooms = state.files.length ? devicesOf(currentFile()).reduce((n, d) => n + (d.ooms || 0), 0) : 0;
  for (const v of views) {
    if (!v.available(state)) continue;
    // The OOM tab carries the file's count of oom events, so a file that ran out of memory says so from any view.
    const badge = v.id === 'oom' && ooms
      ? el('span', { class: 'badge', 'data-oom-badge': ooms, title: `${count(ooms)} out-of-memory event(s)` }, count(ooms)) : null;
    tabs.append(el('button', {
      type: 'button', class: v.id === state.view ? 'tab active' : 'tab', 'data-view': v.id,
      title: `${v.long || v.title} (key ${v.key})`, onclick: () => selectView(v.id),
    }, v.title, badge));
  }
  if (!state.files.length) {  // a ranks file: no snapshot to pick a file or device of, nothing to search
    for (const id of ['file-pick', 'device-pick', 'search', 'window-note']) $(id).classList.add('hidden');
    return;
  }
  const fs = $('file-select');
  fs.replaceChildren(...state.files.map((f, i) => el('option', { value: i, text: f.name })));
  fs.value = String(state.file);
  $('file-pick').classList.toggle('hidden', state.files.length < 2);
  fillDevices();
  // A window of the file: said in the bar on every view, since each answer covers only it.
  const win = currentFile().info.window;
  $('window-note').classList.toggle('hidden', !win);
  $('window-note').textContent = win ? `only ${win}` : '';
  $('window-note').title = win ? `Only ${win} of each device's trace was loaded (?from=&to=), with the allocations ` +
    'alive at its start and the releases of what was alive at its end. Steps and times are the file\'s own.' : '';
  $('search').classList.remove('hidden');
  $('search').value = state.search;
}

function fillDevices() {
  const ds = devicesOf(currentFile());
  const sel = $('device-select');
  // The selector's own short name for host memory keeps the header short; its title has the whole name.
  const host = !!currentFile().info.host_of;
  sel.replaceChildren(...ds.map((d) => el('option', { value: d.device, title: deviceName(currentFile(), d.device),
    text: `${host ? 'host (pinned)' : deviceName(currentFile(), d.device)}${d.events ? '' : ' (no trace)'}` })));
  sel.value = String(state.device);
  // A file's pinned host memory shows its one "device" too: the file selector's name may be cut short, and this says
  // what the views draw.
  $('device-pick').classList.toggle('hidden', ds.length < 2 && !currentFile().info.host_of);
}

function selectView(id) {
  if (id === state.view) return;
  const patch = { view: id, pinned: null };
  // The Diff view's time axis measures from each trace's first event; a single-file view's is the trace's own clock,
  // so that window does not carry over either way (on the event axis both count events from the start, and it does).
  if ((state.view === 'diff' || id === 'diff') && state.axis === 'time') patch.window = null;
  set(patch, { quiet: true, push: true });  // Back returns to the view before
  for (const b of $('tabs').children) b.classList.toggle('active', b.dataset.view === id);
  mountView();
}

// ---- views ----

let mounted = null;
let mountSeq = 0;

function mountView() {
  if (mounted) { try { mounted.destroy(); } catch (e) { console.error(e); } }
  mounted = null;
  const root = $('view');
  root.replaceChildren();
  root.className = `view-${state.view}`;
  const v = views.find((x) => x.id === state.view) || views[0];
  // Views that show details (detail: true) get the column beside them before they mount, so they measure their
  // canvases once, at the width they keep.
  $('detail').replaceChildren(detailPlaceholder());
  $('detail').classList.toggle('hidden', !v.detail);
  const my = ++mountSeq;
  // A per-device view on a device the trace never reached (a 4-GPU box traced on one): say so, not the core's error.
  // Views marked fromSegments (State, Flame, Peak) answer a device without a trace from the segments it holds.
  const dev = v.perDevice ? devicesOf(currentFile()).find((d) => d.device === state.device) : null;
  if (dev && !dev.events && !(v.fromSegments && dev.segments)) {
    root.append(el('div', { class: 'verdict', 'data-empty': 'no-trace' },
      `${deviceName(currentFile(), dev.device)} has no trace: this snapshot recorded no allocation events on that device, so ` +
      `${v.long || v.title} has nothing to show for it. Choose a device with a trace in the device selector` +
      (dev.segments ? `; this device's ${count(dev.segments)} segments are counted in the Overview.` : '.')));
    if (html.dataset.state !== 'ready') setPageState('ready');
    return;
  }
  const ctx = {
    state,
    set,
    call,
    file: currentFile,
    files: () => snapshotFiles(state),  // the snapshots opened, not their pinned host memory
    deviceName: (d) => deviceName(currentFile(), d === undefined ? state.device : d),
    openRank,
    device: () => state.device,
    go(id, patch) {
      set(Object.assign({ pinned: null }, patch || {}), { quiet: true });
      // Another file or device (a Ranks row, an OOM's buttons): the header's selectors follow, so they never name
      // the previous file or cuda:N while the view shows another.
      const moved = patch && ('file' in patch || 'device' in patch);
      if (moved && 'file' in patch) fileChanged();
      else if (moved) fillDevices();
      if (moved && id === state.view) mountView();
      else selectView(id);
    },
    painted() { if (my === mountSeq && html.dataset.state !== 'ready') setPageState('ready'); },
    fail(e) { if (my === mountSeq || e.lost) showError(`${v.title}: ${e.message || e}`, e.lost); },
    detail(node) {
      const d = $('detail');
      d.replaceChildren(node || detailPlaceholder());
      if (node && !v.detail) d.classList.remove('hidden');  // a view without the column never asks; shown if one does
    },
  };
  try {
    mounted = v.mount(root, ctx);
  } catch (e) {
    console.error(e);
    showError(`${v.title}: ${e.message || e}`);
  }
}

// Another file in the selector (a snapshot's pinned host memory, another rank): a device it has, a view it has (no
// What-if of host memory), and the tabs and selectors of that file.
function fileChanged() {
  if (!validDevice(state.device)) set({ device: defaultDevice() }, { quiet: true });
  if (!views.some((v) => v.id === state.view && v.available(state))) set({ view: defaultView() }, { quiet: true });
  setupChrome();
}

subscribe((st, patch) => {
  if ('file' in patch) fileChanged();
  // The views read the file and device when they mount: choosing another one in the selectors mounts the view again.
  if (('file' in patch || 'device' in patch) && state.files.length) { mountView(); return; }
  if (!mounted) return;
  try { mounted.update(patch); } catch (e) { console.error(e); }
});

// ---- help ----

// Every view's own key is listed from the views themselves (w, 8 and 9 were missing from a fixed "0–9" line).
const KEYS = [
  ['?', 'this help'], ['o', 'open files'],
  ['← →', 'pan the timeline; step the allocator state history'], ['+ − / wheel', 'zoom the timeline'],
  ['Home', 'zoom out to everything'], ['t', 'event axis ↔ time axis'], ['c', 'colour by allocation ↔ by category'], ['/', 'search frames (regex) or an address (0x…)'],
  ['f', 'toggle the frame filter (hide Python/C++ internals in stacks)'], ['Esc', 'unpin / close'],
  ['click', 'pin the hovered allocation'],
];

function openHelp() {
  const t = $('help-keys');
  const viewKeys = views.map((v) => [v.key, `${v.long || v.title}${v.id === 'diff' ? ' (two files)' : v.id === 'ranks' ? ' (two or more files)' : ''}`]);
  t.replaceChildren(...[...KEYS.slice(0, 2), ...viewKeys, ...KEYS.slice(2)].map(([k, d]) =>
    el('tr', { 'data-help-key': k }, el('td', null, el('kbd', { text: k })), el('td', { text: d }))));
  if (!$('help').open) $('help').showModal();
}

// ---- wiring ----

function wire() {
  $('file-input').addEventListener('change', (e) => { open(filesFromList(e.target.files)); e.target.value = ''; });
  $('open-button').addEventListener('click', () => $('file-input').click());
  $('example-button').addEventListener('click', async () => {
    try { await open(await fetchFiles(['examples/resnet50_train.pickle'])); } catch (e) { showError(e.message); }
  });
  $('error-back').addEventListener('click', () => {
    if (state.files.length || state.ranksFile) { show('view'); setPageState('ready'); mountView(); } else { show('welcome'); setPageState('empty'); }
  });
  $('help-button').addEventListener('click', openHelp);
  $('help-close').addEventListener('click', () => $('help').close());
  // Another file has its own trace and clock: its window and step start over, as another device's window does.
  $('file-select').addEventListener('change', (e) => set({ file: Number(e.target.value), pinned: null, window: null, step: null }));
  $('device-select').addEventListener('change', (e) => set({ device: Number(e.target.value), window: null, pinned: null }));
  $('search').addEventListener('input', (e) => set({ search: e.target.value }));

  let depth = 0;
  const overlay = $('drop-overlay');
  document.addEventListener('dragenter', (e) => { e.preventDefault(); ++depth; overlay.classList.remove('hidden'); });
  document.addEventListener('dragleave', () => { if (--depth <= 0) { depth = 0; overlay.classList.add('hidden'); } });
  document.addEventListener('dragover', (e) => e.preventDefault());
  document.addEventListener('drop', (e) => {
    e.preventDefault();
    depth = 0;
    overlay.classList.add('hidden');
    if (e.dataTransfer && e.dataTransfer.files.length) open(filesFromList(e.dataTransfer.files));
  });

  document.addEventListener('keydown', (e) => {
    if (e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement || e.ctrlKey || e.metaKey || e.altKey) {
      if (e.key === 'Escape' && e.target === $('search')) e.target.blur();
      return;
    }
    if (e.key === '?') { openHelp(); e.preventDefault(); return; }
    if (e.key === 'o') { $('file-input').click(); return; }
    if (e.key === '/') { $('search').focus(); e.preventDefault(); return; }
    if (e.key === 'f') { set({ filterFrames: !state.filterFrames }); return; }
    const v = views.find((x) => x.key === e.key && x.available(state));
    if (v && (state.files.length || state.ranksFile)) { selectView(v.id); e.preventDefault(); }
  });
}

// Back/forward, an edited hash, or a shared link pasted into a tab already open on the same files (the browser then
// changes only the hash): the whole hash is applied, as a reload would, and keys it lacks take their defaults. Only
// the view used to be read, and the rest was then overwritten with what was on screen.
window.addEventListener('hashchange', () => {
  if (!state.files.length) return;
  const patch = hashState(state.view);
  if (Object.keys(patch).every((k) => JSON.stringify(patch[k]) === JSON.stringify(state[k]))) return;
  applyState(patch);
  setupChrome();
  mountView();
});

async function start() {
  wire();
  const urls = new URLSearchParams(location.search).getAll('url');
  if (globalThis.__allocscopeEmbed) {
    // The offline report: its snapshots are inside the page.
    $('example-button').classList.add('hidden');
    await open(globalThis.__allocscopeEmbed.files());
  } else if (urls.length) {
    // `allocscope view` with a file too big for the tab (?native=1): it parses its files/I/NAME itself and answers
    // every view's calls (worker_client.js, openNative).
    // A tab that runs out of memory on files it was served that way asks `allocscope view` to parse them instead; a
    // static host has no api/, and the tab's own error stands.
    const native = new URLSearchParams(location.search).get('native') === '1';
    const served = urls.map((u) => /^files\/(\d+)\/([^/]+)$/.exec(u));
    const nativeList = served.every(Boolean) ? served.map((m) => ({ name: decodeURIComponent(m[2]), native: Number(m[1]) })) : null;
    const inNative = async (tabError) => {
      // Only `allocscope view` answers api/progress (a static host has no api/): then its open has its own progress,
      // first picture and errors; else the tab's error stands.
      let served = false;
      try {
        const res = await fetch(`api/progress?file=${nativeList[0].native}`);
        served = res.ok && typeof (await res.json()).phase === 'string';
      } catch (e) { served = false; }
      if (!served) { showError(tabError.message, tabError.lost); return; }
      await open(nativeList);
    };
    try {
      if (native && nativeList) await open(nativeList);
      else await open(await fetchFiles(urls), nativeList ? inNative : undefined);
    } catch (e) { showError(e.message); }
  } else {
    show('welcome');
    setPageState('empty');
    warmUp();
  }
}

window.addEventListener('error', (e) => { if (html.dataset.state === 'loading') showError(e.message); });
window.addEventListener('unhandledrejection', (e) => { if (html.dataset.state === 'loading') showError(String(e.reason && e.reason.message || e.reason)); });

start();
