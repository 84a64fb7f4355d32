#!/usr/bin/env bash
# JSON snapshots: whole-process `allocscope summary` of a snapshot written by Python's json.dump, against the same
# snapshot's pickle and Python's own json.load / pickle.load of those files, in the same run; and the WebAssembly
# loader (the viewer's core, under node) on both. A JSON snapshot repeats every frame as text, so it is many times
# its pickle's size: MB/s and the time for the same snapshot are both printed.
# usage: tests/bench/bench_json.sh [BUILD_DIR=build/default] [PICKLE(.gz)=external/pt26_cs336_train] [RUNS=3]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/default}
src=${2:-tests/fixtures/external/pt26_cs336_train.pickle.gz}
runs=${3:-3}
cli=$build/native/allocscope
work=$(mktemp -d /tmp/allocscope_bench_json.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(date -u '+%F %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$src" "$work" <<'PY'
import gzip, json, pickle, sys
src, work = sys.argv[1], sys.argv[2]
d = pickle.load(gzip.open(src) if src.endswith('.gz') else open(src, 'rb'))
pickle.dump(d, open(work + '/s.pickle', 'wb'))
json.dump(d, open(work + '/s.json', 'w'))
PY
sync "$work/s.pickle" "$work/s.json"
jb=$(stat -c %s "$work/s.json")
pb=$(stat -c %s "$work/s.pickle")
echo "$(basename "$src"): JSON $jb bytes, pickle $pb bytes ($(python3 -c "print(round($jb/$pb,1))")x)"
best() {  # label, bytes, then the command: best wall time of $runs, and max RSS
  local label=$1 bytes=$2 b=999 rss=0
  shift 2
  for _ in $(seq "$runs"); do
    /usr/bin/time -f "%e %M" -o "$work/time" "$@" >/dev/null
    read -r wall m <"$work/time"
    b=$(python3 -c "print(min($b, $wall))")
    rss=$m
  done
  printf '%-40s %6.2f s best of %s  %6.0f MB/s  %5.0f MB max RSS\n' "$label" "$b" "$runs" \
    "$(python3 -c "print($bytes/1e6/max($b, 0.005))")" "$((rss / 1000))"
}
best "allocscope summary, JSON" "$jb" "$cli" summary "$work/s.json"
best "allocscope summary, pickle" "$pb" "$cli" summary "$work/s.pickle"
for kind in json pickle; do
  python3 - "$work" "$kind" <<'PY'
import json, pickle, sys, time
work, kind = sys.argv[1], sys.argv[2]
data = open(work + ('/s.json' if kind == 'json' else '/s.pickle'), 'rb').read()
best = min((lambda t: (json.loads(data) if kind == 'json' else pickle.loads(data), time.perf_counter() - t)[1])(time.perf_counter()) for _ in range(3))
print(f"Python {kind}.loads (parse only)          {best:6.2f} s best of 3  {len(data) / 1e6 / best:6.0f} MB/s")
PY
done
wasm=$(dirname "$build")/wasm/wasm
if [ -f "$wasm/allocscope.wasm" ]; then
  for f in s.json s.pickle; do
    echo "WebAssembly loader (node), $f:"
    node tests/bench/bench_wasm_load.js "$wasm" web/engine.js "$work/$f" "$runs" | tail -2
  done
fi
