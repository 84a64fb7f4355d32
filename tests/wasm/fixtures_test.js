// Node test of the wasm build: loads a real fixture through the same engine.js the worker uses (gzip inflated by
// DecompressionStream, as in the browser) and checks the core's answers against PyTorch's golden files.
// usage: node fixtures_test.js GLUE_JS ENGINE_JS FIXTURE EXPECTED_DIR
'use strict';
const fs = require('fs');
const path = require('path');
const assert = require('assert');
const checks = require('./checks.js');

async function main() {
  const [glue, enginePath, fixture, expectedDir] = process.argv.slice(2);
  const factory = require(path.resolve(glue));
  const { openEngine, readChunks } = require(path.resolve(enginePath));
  const wasmBinary = fs.readFileSync(path.join(path.dirname(path.resolve(glue)), 'allocscope.wasm'));
  const engine = await openEngine(factory, { wasmBinary });

  const base = path.basename(fixture).replace(/\.pickle(\.gz)?$/, '');
  const bytes = new Uint8Array(fs.readFileSync(fixture));
  const phases = new Set();
  engine.m.onProgress = (phase) => phases.add(phase);
  // The page's path: stream the file (inflating gzip) into the core chunk by chunk.
  const t0 = Date.now();
  const id = await engine.loadStream(bytes, path.basename(fixture), (phase) => phases.add(phase));
  console.log(`${base}: streamed ${bytes.length} bytes in ${Date.now() - t0} ms; ` +
              `progress phases: ${[...phases].join(',')}`);
  // The whole-buffer path must give the same model.
  const { chunks, length } = await readChunks(bytes);
  const whole = engine.load(chunks, length, 'whole');
  assert.deepStrictEqual(engine.call({ method: 'facts', id: whole }).body, engine.call({ method: 'facts', id }).body);
  engine.unload(whole);

  let passed = 0, failed = 0;
  for (const check of checks.all) {
    const expectedFile = path.join(expectedDir, `${base}.${check.golden}`);
    if (!fs.existsSync(expectedFile)) continue;
    if (check.available && !check.available(engine)) { console.log(`  skip ${check.name}: method not in this build`); continue; }
    try {
      check.run(engine, id, JSON.parse(fs.readFileSync(expectedFile, 'utf8')), assert);
      console.log(`  ok   ${check.name}`);
      ++passed;
    } catch (e) {
      console.log(`  FAIL ${check.name}: ${e.message}`);
      ++failed;
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed || !passed ? 1 : 0);
}

main().catch((e) => { console.error(e && e.stack ? e.stack : e); process.exit(1); });
