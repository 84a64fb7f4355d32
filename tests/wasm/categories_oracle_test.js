// Node test: the categories the viewer shows (the wasm build's `allocation` answers, which colour the timeline and fill
// the detail panel) against PyTorch's Memory Profiler on every loop of tests/fixtures/categories_oracle. The
// measure is computed here, independently of the C++ test's: at 12 evenly spaced steps of each trace, the share of
// live bytes the profiler labelled that carry its category, averaged; it must be at least 90% on every loop but
// graphed_mlp_sgd, whose gradients only the profiler can name (0.648; categories_oracle_test.cpp and
// docs/analyses.md say why).
// usage: node categories_oracle_test.js GLUE_JS ENGINE_JS ORACLE_DIR
'use strict';
const fs = require('fs');
const path = require('path');

const POINTS = 12;
const FLOOR = 0.9;
const FLOORS = { graphed_mlp_sgd: 0.6 };

async function main() {
  const [glue, enginePath, dir] = process.argv.slice(2);
  const factory = require(path.resolve(glue));
  const { openEngine } = require(path.resolve(enginePath));
  const wasmBinary = fs.readFileSync(path.join(path.dirname(path.resolve(glue)), 'allocscope.wasm'));
  const engine = await openEngine(factory, { wasmBinary });
  const loops = fs.readdirSync(dir).filter((f) => f.endsWith('.labels.json')).map((f) => f.replace('.labels.json', ''));
  let passed = 0, failed = 0;
  if (loops.length < 11) { console.log(`  FAIL only ${loops.length} loops in ${dir}`); ++failed; }
  for (const name of loops.sort()) {
    const labels = JSON.parse(fs.readFileSync(path.join(dir, `${name}.labels.json`), 'utf8'));
    const id = await engine.loadStream(new Uint8Array(fs.readFileSync(path.join(dir, `${name}.pickle.gz`))), name);
    const device = labels.device || 0;
    // The profiler's category per alloc entry (by its index in the device's trace) and per block alive before it.
    const byEvent = new Map(), byAddr = new Map();
    for (const a of labels.allocs) if (a.how !== null && a.window !== 'before') byEvent.set(a.i, a.category);
    for (const b of labels.blocks) if (b.how !== null) byAddr.set(BigInt(b.addr), b.category);
    const rows = [];
    for (let row = 0; ; ++row) {
      let a;
      try { a = engine.call({ method: 'allocation', id, device, row }).body; } catch (e) { break; }
      const label = a.origin === 'traced' ? byEvent.get(a.birth_step - 1) : byAddr.get(BigInt(a.address));
      rows.push({ birth: a.birth_step, death: a.death_step, size: a.size, ours: a.category, label, steps: a.steps });
    }
    const steps = rows.length ? rows[0].steps : 0;
    let sum = 0, points = 0;
    for (let k = 1; k <= POINTS; ++k) {
      const step = Math.floor(((steps - 1) * k) / (POINTS + 1));
      let total = 0, same = 0;
      for (const r of rows) {
        if (r.label === undefined || step < r.birth || step >= r.death) continue;
        total += r.size;
        if (r.ours === r.label) same += r.size;
      }
      if (total) sum += same / total, ++points;
    }
    const agreement = points ? sum / points : 0;
    const labelled = rows.filter((r) => r.label !== undefined).length;
    const line = `${name}: ${rows.length} allocations (${labelled} labelled), agreement ${agreement.toFixed(3)} over ${points} points`;
    if (points === POINTS && agreement >= (FLOORS[name] ?? FLOOR) && rows.every((r) => typeof r.ours === 'string')) {
      console.log(`  ok   ${line}`);
      ++passed;
    } else {
      console.log(`  FAIL ${line} (needs ${FLOOR} over ${POINTS})`);
      ++failed;
    }
    engine.unload(id);
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => { console.error(e); process.exit(1); });
