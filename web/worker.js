// The Web Worker that owns the wasm core: reads and inflates dropped files, parses them, and answers the views'
// queries with small JSON bodies and transferable typed arrays, so the page's thread only draws.
'use strict';
// In the offline report the engine and glue come in the same blob as this file, with the wasm as base64.
if (!self.AllocscopeEngine) importScripts('engine.js', 'allocscope.js');

let enginePromise = null;
function engine() {
  if (!enginePromise) {
    const options = {};
    if (self.__allocscopeWasmB64) {
      const s = atob(self.__allocscopeWasmB64);
      options.wasmBinary = new Uint8Array(s.length);
      for (let i = 0; i < s.length; ++i) options.wasmBinary[i] = s.charCodeAt(i);
    }
    enginePromise = self.AllocscopeEngine.openEngine(self.createAllocscope, options);
  }
  return enginePromise;
}

function reply(msg, transfer) { self.postMessage(msg, transfer || []); }

function describe(e) { return e && e.message ? e.message : String(e); }

async function open(seq, files) {
  const eng = await engine();
  const ids = [];
  const infos = [];
  for (let i = 0; i < files.length; ++i) {
    const { name, blob } = files[i];
    const progress = (phase, done, total) => reply({ op: 'progress', seq, file: i, files: files.length, name, phase, done, total });
    let id;
    try {
      id = await eng.loadStream(blob, name, progress);  // read, inflate and parse together, chunk by chunk
    } catch (e) {
      throw new Error(`${name}: ${describe(e)}`);
    }
    ids.push(id);
    infos.push(eng.call({ method: 'info', id }).body);
  }
  return { ids, infos };
}

self.onmessage = async (event) => {
  const msg = event.data;
  try {
    if (msg.op === 'open') {
      const { ids, infos } = await open(msg.seq, msg.files);
      self.allocscopeEngine = await engine();  // for benchmarks and debugging (worker.evaluate)
      reply({ op: 'opened', seq: msg.seq, ids, infos });
    } else if (msg.op === 'unload') {
      const eng = await engine();
      for (const id of msg.ids) eng.unload(id);
    } else if (msg.op === 'call') {
      const eng = await engine();
      const { body, blobs } = eng.call(msg.request);
      reply({ op: 'answer', seq: msg.seq, body, blobs }, Object.values(blobs).map((b) => b.buffer));
    }
  } catch (e) {
    let message = describe(e);
    // A wasm abort (out of memory past the 4 GB heap, or a bug) leaves the module unusable: start a fresh one next
    // time, and say so in words.
    if (e instanceof WebAssembly.RuntimeError || /abort|out of memory|Cannot enlarge memory/i.test(message)) {
      enginePromise = null;
      self.allocscopeEngine = null;
      message = `the WebAssembly core stopped (${message}): this snapshot's model does not fit in the browser's 4 GB ` +
                'WebAssembly memory. Use the allocscope command line for it (allocscope summary FILE), or record a ' +
                'shorter trace. Reload the page to open other files.';
    }
    reply({ op: 'error', seq: msg.seq, message });
  }
};
