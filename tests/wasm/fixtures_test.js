// Node test of the wasm build: loads a real fixture through the same engine.js the worker uses (gzip inflated by
// DecompressionStream, as in the browser) and checks the core's answers against PyTorch's golden files.
// usage: node fixtures_test.js GLUE_JS ENGINE_JS FIXTURE EXPECTED_DIR [methods]
//        (methods: also run every view's method on every device with a trace, for files without other goldens)
'use strict';
const fs = require('fs');
const path = require('path');
const assert = require('assert');
const checks = require('./checks.js');

async function main() {
  const [glue, enginePath, fixture, expectedDir, mode] = process.argv.slice(2);
  const factory = require(path.resolve(glue));
  const { openEngine, readChunks } = require(path.resolve(enginePath));
  const wasmBinary = fs.readFileSync(path.join(path.dirname(path.resolve(glue)), 'allocscope.wasm'));
  const engine = await openEngine(factory, { wasmBinary });

  const base = path.basename(fixture).replace(/\.(pickle|json)(\.gz)?$/, '');  // a JSON snapshot: its pickle's goldens
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
  if (mode === 'methods') {
    try {
      methodsAnswer(engine, id, assert);
      console.log('  ok   every view\'s method answers on every device with a trace');
      ++passed;
    } catch (e) {
      console.log(`  FAIL every view's method answers on every device with a trace: ${e.message}`);
      ++failed;
    }
    // Pinned host memory (PyTorch 2.14): the viewer opens it as a file of its own, whose views answer as a GPU's.
    const host = engine.call({ method: 'info', id }).body.host;
    const hostId = engine.openHost(id);
    try {
      assert.strictEqual(!!hostId, !!host, `openHost gives a file exactly when info has host memory (${hostId})`);
      if (hostId) {
        const hinfo = engine.call({ method: 'info', id: hostId }).body;
        assert.strictEqual(hinfo.host_of, path.basename(fixture), 'the host file names the file it came from');
        assert.strictEqual(hinfo.facts.total_reserved, host.reserved_bytes, 'its segments are the host memory reserved');
        assert.strictEqual(hinfo.facts.trace_events_per_device.reduce((a, b) => a + b, 0), host.events, 'its trace holds the host events');
        methodsAnswer(engine, hostId, assert);
        console.log('  ok   the pinned host memory opens as a file of its own, and every view\'s method answers on it');
        ++passed;
      }
    } catch (e) {
      console.log(`  FAIL the pinned host memory as a file of its own: ${e.message}`);
      ++failed;
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed || !passed ? 1 : 0);
}

// What the viewer asks of the core for each view, on each device with a trace, with the answers' own invariants: a
// timeline of bands, the allocator state at the last event holding the device's segments, the flame graph at the
// peak holding the peak's bytes, one OOM entry per oom event.
function methodsAnswer(engine, id, assert) {
  const info = engine.call({ method: 'info', id }).body;
  for (const d of info.devices) {
    if (!d.events) continue;
    const q = (req) => engine.call(Object.assign({ id, device: d.device }, req));
    const where = `cuda:${d.device}`;
    const steps = q({ method: 'axis' }).body.step_count;
    assert.strictEqual(steps, d.events + 1, `${where}: axis steps`);
    for (const method of ['timeline_draw', 'segment_draw']) {
      const { body } = q({ method, x0: 0, x1: steps, width: 300, height: 200 });
      assert.ok(body.rects > 0, `${where}: ${method} draws rectangles (${body.rects})`);
    }
    const state = q({ method: 'state_at', step: steps - 1 });
    assert.strictEqual(state.blobs.seg_size.length, d.segments, `${where}: state_at the last event holds the device's segments`);
    const peak = q({ method: 'peak', top: 5 }).body;
    assert.strictEqual(q({ method: 'flame', step: -1, filter: true }).body.total, peak.allocated.bytes, `${where}: flame at the peak`);
    q({ method: 'memoryviz', with_totals: false });
    q({ method: 'leaks' });
  }
  const facts = engine.call({ method: 'facts', id }).body;
  assert.strictEqual(engine.call({ method: 'ooms', id }).body.ooms.length, facts.actions.oom || 0, 'one OOM entry per oom event');
  engine.call({ method: 'summary', id, top: 5 });
}

main().catch((e) => { console.error(e && e.stack ? e.stack : e); process.exit(1); });
