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

// files: [{name, blob}] -> {ids, infos}
export function openFiles(files, onProgress) { return send({ op: 'open', files }, onProgress); }

export function unload(ids) { if (worker) worker.postMessage({ op: 'unload', ids, seq: 0 }); }

// request: {method, id|ids, ...} -> {body, blobs}
export async function call(request) {
  const m = await send({ op: 'call', request });
  return { body: m.body, blobs: m.blobs };
}
