// Node test: hostile or broken inputs give a human error that names a byte offset, never a crash or a hang.
// usage: node bad_input_test.js GLUE_JS ENGINE_JS FIXTURE
'use strict';
const fs = require('fs');
const path = require('path');

async function main() {
  const [glue, enginePath, fixture] = process.argv.slice(2);
  const factory = require(path.resolve(glue));
  const { openEngine, readChunks } = require(path.resolve(enginePath));
  const wasmBinary = fs.readFileSync(path.join(path.dirname(path.resolve(glue)), 'allocscope.wasm'));
  const engine = await openEngine(factory, { wasmBinary });
  const good = new Uint8Array(fs.readFileSync(fixture));
  const json = new Uint8Array(fs.readFileSync(path.join(path.dirname(fixture), 'json', 'oom.json')));
  const cases = [
    // JSON snapshots are read; JSON that is not one, or is cut, is said so with the JSON's byte.
    ['JSON profiler trace', new TextEncoder().encode('{"schemaVersion": 1, "traceEvents": []}'),
     /JSON, but not a memory snapshot: a dict with the key\(s\) 'schemaVersion', 'traceEvents'/],
    ['truncated JSON snapshot', json.slice(0, Math.floor(json.length / 2)), /^near byte \d+ of the JSON: /],
    ['gzip of a truncated JSON snapshot', new Uint8Array(require('zlib').gzipSync(json.slice(0, 5000))),
     /^near byte \d+ of the inflated JSON: /],
    ['empty file', new Uint8Array(0)],
    // Text and CSV are said to be text (their bytes are pickle opcodes too: 'h' is BINGET), and a pickle that is not a
    // snapshot is refused with what it holds, not loaded as an empty snapshot (issue 40).
    ['text file', new TextEncoder().encode('hello, this is not a pickle\n'), /a text file, not a pickle: it begins "hello, this is not a pickle"/],
    ['CSV file', new TextEncoder().encode('step,bytes\n1,100\n'), /CSV text, not a pickle: it begins "step,bytes"/],
    // pickle.dumps({'a': [1, 2, 3]}, protocol=2)
    ['pickle of another dict', new Uint8Array(Buffer.from('80027d710058010000006171015d7102284b014b024b0365732e', 'hex')),
     /a pickle, but not a memory snapshot: a dict with the key\(s\) 'a'/],
    ['truncated pickle', good.slice(0, Math.floor(good.length / 2))],
    ['pickle calling a global', new Uint8Array([0x80, 0x02, 0x63, ...new TextEncoder().encode('os\nsystem\n'), 0x2e])],
    ['gzip header then garbage', new Uint8Array([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6, 7, 8])],
    // The offset counts the inflated bytes and says so (a reader of a .gz's error looks for that byte in the file).
    ['gzip of a truncated pickle', new Uint8Array(require('zlib').gzipSync(good.slice(0, Math.floor(good.length / 2)))),
     / of the inflated pickle: /],
  ];
  let passed = 0, failed = 0;
  for (const [name, bytes, says] of cases) {
    let message = null;
    // Both the streamed path (the page's) and the whole-buffer path must refuse it in words.
    for (const mode of ['stream', 'whole']) {
      message = null;
      try {
        if (mode === 'stream') {
          await engine.loadStream(bytes, name);
        } else {
          const { chunks, length, gzip } = await readChunks(bytes);
          engine.load(chunks, length, name, gzip);
        }
      } catch (e) {
        message = e.message;
      }
      if (message && message.length > 5 && (!says || says.test(message))) {
        console.log(`  ok   ${name} (${mode}): ${message}`);
        ++passed;
      } else {
        console.log(`  FAIL ${name} (${mode}): ${message ? `said "${message}", not ${says}` : 'loaded without an error'}`);
        ++failed;
      }
    }
  }
  // The engine still works after all those errors.
  const id = await engine.loadStream(good, 'good');
  if (engine.call({ method: 'facts', id }).body.segments > 0) ++passed; else ++failed;
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => { console.error(e && e.stack ? e.stack : e); process.exit(1); });
