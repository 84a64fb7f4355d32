// Node test: the test-only wasm build whose heap is capped at 68 MB really runs out of memory on the 1M-event file:
// the load throws WebAssembly.RuntimeError (an abort, not a hang or a wrong answer) and the core's new-handler has set
// Module.outOfMemory, which the viewer's worker turns into "too large for the browser's memory". A small file loads
// in the same capped build, so the cap is what fails the big one. A JSON snapshot too big for it fails the same way.
// usage: node out_of_memory_test.js CAPPED_GLUE_JS ENGINE_JS BIG_FIXTURE SMALL_FIXTURE
'use strict';
const fs = require('fs');
const path = require('path');

async function main() {
  const [glue, enginePath, big, small] = process.argv.slice(2);
  const factory = require(path.resolve(glue));
  const { openEngine } = require(path.resolve(enginePath));
  const wasmBinary = fs.readFileSync(path.join(path.dirname(path.resolve(glue)), 'allocscope.wasm'));
  let passed = 0, failed = 0;
  const ok = (cond, what) => { if (cond) { ++passed; console.log(`  ok   ${what}`); } else { ++failed; console.log(`  FAIL ${what}`); } };

  const first = await openEngine(factory, { wasmBinary });
  const id = await first.loadStream(new Uint8Array(fs.readFileSync(small)), path.basename(small));
  ok(id > 0 && first.call({ method: 'info', id }).body.devices.length > 0, 'a small file loads in the capped build');

  const engine = await openEngine(factory, { wasmBinary });
  let error = null;
  try {
    await engine.loadStream(new Uint8Array(fs.readFileSync(big)), path.basename(big));
  } catch (e) {
    error = e;
  }
  ok(error instanceof WebAssembly.RuntimeError, `the big file aborts the capped core (${error && error.message})`);
  ok(engine.m.outOfMemory === true, 'the abort is flagged as out of memory (Module.outOfMemory)');
  ok(engine.m.HEAPU8.length <= 68 * 1024 * 1024, `the heap stayed within the cap (${engine.m.HEAPU8.length} bytes)`);

  // A JSON snapshot is held whole and indexed by simdjson (docs/loader.md): one too big for the heap ends as an error
  // in words or the same flagged abort, never a hang or a partial model. ~80 MB of trace entries, made here.
  const entry = '{"action": "alloc", "addr": 139637976727552, "size": 512, "stream": 0, "time_us": 1700000000000001, ' +
                '"frames": [{"filename": "train.py", "line": 18, "name": "step"}]},';
  const text = '{"segments": [], "device_traces": [[' + entry.repeat(Math.ceil(80e6 / entry.length)) + entry.slice(0, -1) + ']]}';
  const jsonEngine = await openEngine(factory, { wasmBinary });
  let jsonError = null;
  try {
    await jsonEngine.loadStream(new TextEncoder().encode(text), 'big.json');
  } catch (e) {
    jsonError = e;
  }
  ok(jsonError !== null, `a JSON snapshot too big for the capped heap is refused (${jsonError && jsonError.message})`);
  ok((jsonError instanceof WebAssembly.RuntimeError && jsonEngine.m.outOfMemory === true) ||
     (jsonError && /memory|cannot hold/i.test(jsonError.message)),
     'as out of memory: flagged, or said in words');
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => { console.log(`  FAIL ${e && e.stack ? e.stack : e}`); process.exit(1); });
