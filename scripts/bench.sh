#!/usr/bin/env bash
# Builds and runs every benchmark (tests/bench) on the 1M-event fixture; paste the numbers into tests/bench/RESULTS.md
# with the date and machine. Benchmarks are not tests: nothing here fails on a slow number.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
cmake --preset default >/dev/null
cmake --build --preset default
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(date -u +%F)"
for b in build/default/tests/bench/bench_*; do
  [ -x "$b" ] || continue
  echo "=== $(basename "$b")"
  "$b" "$@"
done
echo "=== JSON snapshots against their pickle and Python's json.loads"
tests/bench/bench_json.sh build/default
if [ -f build/wasm/wasm/allocscope.wasm ]; then
  echo "=== wasm loader under node (the viewer's core)"
  node tests/bench/bench_wasm_load.js build/wasm/wasm web/engine.js tests/fixtures/gpt2_big_1M.pickle.gz 5
fi
if [ -d build/wasm/site ]; then
  echo "=== browser: drop -> first paint, memory (headless Chromium)"
  node tests/browser/bench_first_paint.js build/wasm/site tests/fixtures/gpt2_big_1M.pickle.gz 2
  echo "=== browser: pan/zoom latency"
  node tests/browser/bench_pan_zoom.js build/wasm/site tests/fixtures/gpt2_big_1M.pickle.gz
  echo "=== browser: PyTorch's MemoryViz against ours, drop -> first timeline (same run, same bytes)"
  node tests/browser/bench_memoryviz.js build/wasm/site --runs=2
fi
