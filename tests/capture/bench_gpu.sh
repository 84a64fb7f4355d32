#!/usr/bin/env bash
# Per-API-call cost of a cudaMallocAsync/cudaFreeAsync loop: bare, under a do-nothing CUPTI subscriber, and under
# `allocscope record` with stacks none and native (32 frames of a 40-deep stack); ROUNDS interleaved runs of each,
# medians printed last. Also times the dump of the last 100k events (ring buffer) from inside the job.
# usage: tests/capture/bench_gpu.sh STAGE_DIR [ROUNDS]
set -u
S=$(cd "$1" && pwd)
# Also usable on its own: the CUDA/CUPTI libraries and the staged ones on the path (run_gpu.sh exports the same).
for d in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib64; do
  [ -d "$d" ] && LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}:$S:$S/dw"
ROUNDS=${2:-5}
LOG=$(mktemp)
for r in $(seq "$ROUNDS"); do
  "$S/bench_capture" --label bare --depth 40
  CUDA_INJECTION64_PATH="$S/libbench_capture_noop.so" "$S/bench_capture" --label cupti-noop --depth 40
  "$S/allocscope" record --stacks none -o /tmp/b.pickle --no-dump-at-exit -- \
    "$S/bench_capture" --label stacks-none --depth 40 --dump /tmp/d_none.pickle
  "$S/allocscope" record --stacks native --max-frames 32 -o /tmp/b.pickle --no-dump-at-exit -- \
    "$S/bench_capture" --label stacks-native-32 --depth 40 --dump /tmp/d_native.pickle
done | tee "$LOG"
echo "-- medians over $ROUNDS rounds"
python3 - "$LOG" <<'PY'
import re, statistics, sys
calls, dumps = {}, {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+): ([\d.]+) ns per API call", line)
    if m: calls.setdefault(m[1], []).append(float(m[2]))
    m = re.match(r"(\S+): dump \S+ in ([\d.]+) ms", line)
    if m: dumps.setdefault(m[1], []).append(float(m[2]))
bare = statistics.median(calls["bare"])
for k, v in calls.items():
    med = statistics.median(v)
    print(f"{k:18s} median {med:7.1f} ns/call  overhead {med - bare:7.1f} ns/call  (runs: {', '.join(f'{x:.0f}' for x in v)})")
for k, v in dumps.items():
    print(f"{k:18s} dump of 100k events: median {statistics.median(v):.1f} ms (runs: {', '.join(f'{x:.0f}' for x in v)})")
PY
ls -la /tmp/d_none.pickle /tmp/d_native.pickle
rm -f "$LOG"
