// The Web Worker that owns the wasm core: reads and inflates dropped files, parses them, and answers the views'
// queries with small JSON bodies and transferable typed arrays, so the page's thread only draws.
'use strict';
// In the offline report the engine and glue come in the same blob as this file, with the wasm as base64.
if (!self.AllocscopeEngine) importScripts('engine.js', 'allocscope.js');

let enginePromise = null;
let current = null;  // the Engine once started: read after an abort for its heap size and out-of-memory flag
let warmCancelled = false;  // a file came: the warm-up (op warm) stops at its next pause
function engine() {
  if (!enginePromise) {
    const options = {};
    if (self.__allocscopeWasmB64) {
      const s = atob(self.__allocscopeWasmB64);
      options.wasmBinary = new Uint8Array(s.length);
      for (let i = 0; i < s.length; ++i) options.wasmBinary[i] = s.charCodeAt(i);
    }
    enginePromise = self.AllocscopeEngine.openEngine(self.createAllocscope, options).then((e) => (current = e));
  }
  return enginePromise;
}

function reply(msg, transfer) { self.postMessage(msg, transfer || []); }

function describe(e) { return e && e.message ? e.message : String(e); }

// window: {from, to} or null: only that window of each device's trace is loaded (the page's ?from=&to=).
async function open(seq, files, window) {
  const eng = await engine();
  const ids = [];
  const infos = [];
  for (let i = 0; i < files.length; ++i) {
    const { name, blob } = files[i];
    const progress = (phase, done, total) => reply({ op: 'progress', seq, file: i, files: files.length, name, phase, done, total });
    let id;
    try {
      // Read, inflate and parse together, chunk by chunk; the memory curve of what is parsed goes to the page as it grows.
      const preview = (curve) => reply({ op: 'progress', seq, file: i, files: files.length, name, phase: 'preview', curve });
      id = await eng.loadStream(blob, name, progress, preview, window);
    } catch (e) {
      const err = new Error(`${name}: ${describe(e)}`);
      err.abort = e instanceof WebAssembly.RuntimeError;
      err.file = name;
      throw err;
    }
    ids.push(id);
    infos.push(eng.call({ method: 'info', id }).body);
  }
  // Pinned host memory (PyTorch 2.14's record_pinned_host_memory) opens as a file of its own after the dropped ones,
  // so every view answers it as it answers a GPU; its info says which file it came from (host_of).
  for (let i = 0, n = ids.length; i < n; ++i) {
    if (!infos[i].host) continue;
    const id = eng.openHost(ids[i]);
    if (!id) continue;
    ids.push(id);
    infos.push(eng.call({ method: 'info', id }).body);
    infos[i].host.file = ids.length - 1;  // the entry the Overview's button opens
  }
  return { ids, infos };
}

self.onmessage = async (event) => {
  const msg = event.data;
  try {
    if (msg.op === 'open') {
      warmCancelled = true;
      const { ids, infos } = await open(msg.seq, msg.files, msg.window || null);
      self.allocscopeEngine = await engine();  // for benchmarks and debugging (worker.evaluate)
      self.allocscopeOpened = ids;  // their ids (the warm-up's files took ids before them)
      reply({ op: 'opened', seq: msg.seq, ids, infos });
    } else if (msg.op === 'warm') {
      // While the page waits for a file: the core's load and first answers run once on a made-up snapshot, so they
      // are optimised when a file comes (Engine.warmUp); a file dropped meanwhile stops it.
      const eng = await engine();
      if (!self.allocscopeWarm && !warmCancelled) {
        self.allocscopeWarm = { state: 'running' };
        try {
          const r = await eng.warmUp(() => warmCancelled);
          self.allocscopeWarm = r ? Object.assign({ state: 'done' }, r) : { state: 'stopped' };
        } catch (e) {
          self.allocscopeWarm = { state: 'failed', message: describe(e) };
          throw e;  // an abort (a heap that cannot grow) starts a fresh core for the next file (explain)
        }
      }
    } else if (msg.op === 'unload') {
      const eng = await engine();
      for (const id of msg.ids) eng.unload(id);
    } else if (msg.op === 'call') {
      const eng = await engine();
      const { body, blobs } = eng.call(msg.request);
      reply({ op: 'answer', seq: msg.seq, body, blobs }, Object.values(blobs).map((b) => b.buffer));
    }
  } catch (e) {
    reply(Object.assign({ op: 'error', seq: msg.seq }, explain(e)));
  }
};

// A wasm abort leaves the module unusable: the next request starts a fresh one, and the page forgets the files the
// old one held (lost). Running out of memory (the core's new-handler sets outOfMemory) is said in words with what to
// do instead; any other abort is a bug, said as such.
function explain(e) {
  const message = describe(e);
  if (!(e instanceof WebAssembly.RuntimeError || e.abort || /^Aborted\(|Cannot enlarge memory/.test(message))) return { message };
  const m = current && current.m;
  const oom = !!(m && m.outOfMemory);
  const heapMiB = m && m.HEAPU8 ? Math.round(m.HEAPU8.length / (1 << 20)) : 0;
  enginePromise = null;
  current = null;
  self.allocscopeEngine = null;
  const what = e.file ? `${e.file} is` : 'this snapshot is';
  if (oom)
    return { lost: true, message:
      `${what} too large for the browser's memory: the viewer's WebAssembly core ran out of memory at ${heapMiB} MiB ` +
      '(a browser tab gives WebAssembly at most 4 GB, and the model of a snapshot needs about 0.9 times its unzipped ' +
      'size). Open it with `allocscope view FILE`: the same viewer, with the file parsed by the command line, which ' +
      'has no such limit. Or ask it directly: allocscope summary FILE, or allocscope peak FILE --from STEP --to STEP ' +
      '(or --from 10s --to 12s), which loads only that window of the file; or record a shorter trace. ' +
      'The files opened before are closed; open them again.' };
  // Emscripten's hint to rebuild with assertions is for us, not for the reader of the message.
  const said = message.replace(/\.?\s*Build with -s ASSERTIONS=1 for more info\.?/, '');
  return { lost: true, message:
    `the viewer's WebAssembly core stopped (${said}). This is a bug in allocscope; the allocscope command line ` +
    'reads the same file (allocscope summary FILE). The files opened before are closed; open them again.' };
}
