// The page's side of the worker protocol: open files with progress, call methods, get typed arrays back.
let worker = null;
let seq = 0;
const pending = new Map();  // seq -> {resolve, reject, onProgress}

function ensure() {
  if (worker) return worker;
  // The offline report (allocscope plot) carries the worker in the page itself.
  worker = globalThis.__allocscopeEmbed ? globalThis.__allocscopeEmbed.worker()
                                        : new Worker(new URL('./worker.js', import.meta.url));
  worker.onmessage = (e) => {
    const m = e.data;
    const p = pending.get(m.seq);
    if (!p) return;
    if (m.op === 'progress') { if (p.onProgress) p.onProgress(m); return; }
    pending.delete(m.seq);
    if (m.op === 'error') p.reject(Object.assign(new Error(m.message), { lost: !!m.lost }));
    else p.resolve(m);
  };
  worker.onerror = (e) => {
    // A worker that fails to start (missing allocscope.js/.wasm) must still end in a visible error.
    const err = new Error(`the viewer's worker failed: ${e.message || 'could not load allocscope.js / allocscope.wasm'}`);
    for (const p of pending.values()) p.reject(err);
    pending.clear();
    worker = null;
  };
  return worker;
}

function send(msg, onProgress) {
  const w = ensure();
  return new Promise((resolve, reject) => {
    msg.seq = ++seq;
    pending.set(msg.seq, { resolve, reject, onProgress });
    w.postMessage(msg);
  });
}

// Starts the worker and its wasm core while the page waits for a file, so a drop does not also wait for
// allocscope.js and allocscope.wasm to load and compile (~100 ms of the first paint on the dev machine).
export function warmUp() { ensure().postMessage({ op: 'warm', seq: 0 }); }

// files: [{name, blob}] -> {ids, infos}; or [{name, native: I}]: files `allocscope view` parses itself (openNative,
// which loads the window `allocscope view --from/--to` was given). window: {from, to} or null, for the tab's own load.
export function openFiles(files, onProgress, window = null) {
  const native = files.filter((f) => f.native !== undefined).length;
  if (native && native === files.length) return openNative(files, onProgress);
  if (native) return Promise.reject(new Error('files parsed by allocscope view and files parsed in the page cannot be opened together'));
  return send({ op: 'open', files, window }, onProgress);
}

export function unload(ids) {
  const mine = ids.filter((id) => !isNative(id));  // allocscope view keeps its files while it runs
  if (worker && mine.length) worker.postMessage({ op: 'unload', ids: mine, seq: 0 });
}

// request: {method, id|ids, ...} -> {body, blobs}
export async function call(request) {
  const ids = request.ids || [request.id];
  if (ids.some(isNative)) {
    if (!ids.every(isNative)) throw new Error('a file parsed by allocscope view cannot be compared with one parsed in the page');
    return nativeCall(request);
  }
  const m = await send({ op: 'call', request });
  return { body: m.body, blobs: m.blobs };
}

// ---- files too big for the tab: `allocscope view` parses them and runs each method (native/cli/view_native.h) ----
// Its file ids are offset by NATIVE_BASE here, so one page can tell where each call goes.
const NATIVE_BASE = 1 << 24;
const TYPES = { u8: Uint8Array, u16: Uint16Array, u32: Uint32Array, i32: Int32Array, f32: Float32Array, f64: Float64Array };
function isNative(id) { return typeof id === 'number' && id >= NATIVE_BASE; }

async function openNative(files, onProgress) {
  const ids = [];
  const infos = [];
  const hosts = [];  // each file's pinned host memory, listed after all the files as the worker lists it
  for (let i = 0; i < files.length; ++i) {
    const { name, native } = files[i];
    let done = false;
    const poll = async () => {  // the load's progress, while api/open waits for it
      while (!done) {
        await new Promise((resolve) => setTimeout(resolve, 200));
        if (done || !onProgress) continue;
        try {
          const p = await (await fetch(`api/progress?file=${native}`)).json();
          if (!done && (p.phase === 'inflate' || p.phase === 'parse'))
            onProgress({ file: i, files: files.length, name, phase: p.phase, done: p.done, total: p.total });
          // The memory curve of what it has parsed so far: the loading screen's first picture, as the worker's.
          if (!done && p.curve) onProgress({ file: i, files: files.length, name, phase: 'preview', curve: p.curve });
        } catch (e) { /* the next poll tries again */ }
      }
    };
    poll();
    let r;
    try {
      const res = await fetch(`api/open?file=${native}`, { method: 'POST' });
      if (!res.ok) throw new Error(`${name}: allocscope view answered HTTP ${res.status}`);
      r = await res.json();
    } catch (e) {
      throw e instanceof TypeError ? new Error(`${name}: allocscope view does not answer (${e.message}); is it still running?`) : e;
    } finally {
      done = true;
    }
    if (r.error) throw new Error(r.error);
    ids.push(r.ids[0] + NATIVE_BASE);
    infos.push(r.infos[0]);
    if (r.ids.length > 1) hosts.push({ of: infos.length - 1, id: r.ids[1] + NATIVE_BASE, info: r.infos[1] });
  }
  for (const h of hosts) {
    infos[h.of].host.file = ids.length;  // the entry the Overview's button opens
    ids.push(h.id);
    infos.push(h.info);
  }
  return { ids, infos };
}

// The answer's bytes, read from the stream into one buffer of its Content-Length. Chromium's res.arrayBuffer() took
// twice as long for a 3 MB draw answer (66 against 30 ms, measured in the page: the wait of a pan/zoom step).
async function bodyOf(res) {
  const length = Number(res.headers.get('Content-Length'));
  if (!res.body || !(length > 0)) return res.arrayBuffer();
  const out = new Uint8Array(length);
  const reader = res.body.getReader();
  let at = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (at + value.byteLength > length) throw new Error('allocscope view sent more bytes than it announced');
    out.set(value, at);
    at += value.byteLength;
  }
  if (at !== length) throw new Error(`allocscope view's answer ended after ${at} of ${length} bytes`);
  return out.buffer;
}

async function nativeCall(request) {
  const req = Object.assign({}, request);
  if (req.ids) req.ids = req.ids.map((id) => id - NATIVE_BASE);
  if (typeof req.id === 'number') req.id -= NATIVE_BASE;
  let res;
  try {
    res = await fetch('api/call', { method: 'POST', body: JSON.stringify(req) });
  } catch (e) {
    throw new Error(`allocscope view does not answer (${e.message}); is it still running?`);
  }
  if (!res.ok) throw new Error(`allocscope view answered HTTP ${res.status} to ${req.method}`);
  const buf = await bodyOf(res);
  const n = new DataView(buf).getUint32(0, true);
  const body = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 4, n)));
  const start = Math.ceil((4 + n) / 8) * 8;
  const blobs = {};
  for (const b of body._blobs || []) {
    const T = TYPES[b.type] || Uint8Array;
    blobs[b.name] = new T(buf, start + b.offset, b.size / T.BYTES_PER_ELEMENT);
  }
  delete body._blobs;
  if (body.error) throw new Error(body.error);
  return { body, blobs };
}
