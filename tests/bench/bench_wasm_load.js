// The loader compiled to WebAssembly, under node: parse+model throughput of the same core the viewer's worker runs,
// on already-inflated bytes (inflating is timed apart, with node's zlib), through engine.js's whole-buffer path. CPU time is
// printed too: on a shared 2-core machine it is steadier than wall time.
// usage: node tests/bench/bench_wasm_load.js WASM_DIR ENGINE_JS [FILE] [REPS]
//   e.g. node tests/bench/bench_wasm_load.js build/wasm/wasm web/engine.js tests/fixtures/gpt2_big_1M.pickle.gz 5
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

async function main() {
  const [wasmDir, enginePath, file = 'tests/fixtures/gpt2_big_1M.pickle.gz', repsArg = '5'] = process.argv.slice(2);
  if (!wasmDir || !enginePath) {
    console.error('usage: node bench_wasm_load.js WASM_DIR ENGINE_JS [FILE] [REPS]');
    process.exit(2);
  }
  const factory = require(path.resolve(wasmDir, 'allocscope.js'));
  const { openEngine, readChunks } = require(path.resolve(enginePath));
  const engine = await openEngine(factory, { wasmBinary: fs.readFileSync(path.resolve(wasmDir, 'allocscope.wasm')) });

  let bytes = fs.readFileSync(file);
  let inflateMs = 0;
  if (bytes[0] === 0x1f && bytes[1] === 0x8b) {
    const t = process.hrtime.bigint();
    bytes = zlib.gunzipSync(bytes);
    inflateMs = Number(process.hrtime.bigint() - t) / 1e6;
  }
  const raw = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
  const { chunks, length } = await readChunks(raw);
  const times = [], cpus = [];
  let events = 0;
  for (let i = 0; i < Number(repsArg); ++i) {
    const t = process.hrtime.bigint();
    const c = process.cpuUsage();
    const id = engine.load(chunks, length, 'bench');
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
    const dc = process.cpuUsage(c);
    cpus.push((dc.user + dc.system) / 1000);
    events = engine.call({ method: 'facts', id }).body.trace_entries ?? events;
    engine.unload(id);
  }
  times.sort((a, b) => a - b);
  cpus.sort((a, b) => a - b);
  const mb = length / 1e6;
  const best = times[0], median = times[Math.floor(times.length / 2)];
  console.log(`input: ${file} (${mb.toFixed(1)} MB inflated${events ? `, ${events} trace entries` : ''})`);
  console.log(`inflate (node zlib): ${inflateMs.toFixed(0)} ms`);
  console.log(`wasm parse+model: best ${best.toFixed(0)} ms (${(mb / (best / 1000)).toFixed(0)} MB/s), ` +
              `median ${median.toFixed(0)} ms; best CPU ${cpus[0].toFixed(0)} ms ` +
              `(${(mb / (cpus[0] / 1000)).toFixed(0)} MB/s; the machine's load inflates wall time), node ${process.version}`);
}

main().catch((e) => { console.error(e && e.stack ? e.stack : e); process.exit(1); });
