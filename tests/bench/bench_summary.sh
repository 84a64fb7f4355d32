#!/usr/bin/env bash
# Whole-process `allocscope summary` on the 1M-event fixture (.pickle and .pickle.gz) and on a 10M-event snapshot
# made from it (make_big_trace: the trace repeated 10 times), against Python's pickle.load of the same files in the
# same run: wall time, CPU and peak memory (max RSS). The 10M part needs ~2 GB of /tmp and, for Python, ~8 GB of
# memory and a minute: pass "1M" to skip it.
# usage: tests/bench/bench_summary.sh [BUILD_DIR=build/default] [1M|10M (default)] [RUNS=3]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/default}
size=${2:-10M}
runs=${3:-3}
cli=$build/native/allocscope
work=$(mktemp -d /tmp/allocscope_bench_summary.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(date -u '+%F %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
timed() {  # label, then the command
  local label=$1
  shift
  /usr/bin/time -f "%e %M %U %S" -o "$work/time" "$@" >/dev/null
  read -r wall rss user sys <"$work/time"
  printf '%-46s %7.2f s wall  %7.0f MB max RSS  (user %.2f s, sys %.2f s)\n' "$label" "$wall" "$((rss))e-3" "$user" "$sys"
}

gz=tests/fixtures/gpt2_big_1M.pickle.gz
gunzip -c "$gz" >"$work/1M.pickle"
# Written back before timing: the disk's writeback of a fresh 162 MB file otherwise runs beside the first runs
# (this machine has two cores) and is counted against them.
sync "$work/1M.pickle"
echo "1M events: $(stat -c %s "$work/1M.pickle") bytes inflated, $(stat -c %s "$gz") gzip"
for r in $(seq "$runs"); do timed "allocscope summary 1M.pickle (run $r)" "$cli" summary "$work/1M.pickle"; done
for r in $(seq "$runs"); do timed "allocscope summary 1M.pickle.gz (run $r)" "$cli" summary "$gz"; done
timed "anchor: python3 pickle.load(1M.pickle)" python3 -c "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))" "$work/1M.pickle"
timed "anchor: python3 pickle.load(gzip.open(1M.gz))" python3 -c "import gzip,pickle,sys; pickle.load(gzip.open(sys.argv[1]))" "$gz"

[ "$size" = "1M" ] && exit 0
"$build/tests/bench/make_big_trace" "$gz" "$work/10M.pickle" 10 2>/dev/null
sync "$work/10M.pickle"
echo "10M events: $(stat -c %s "$work/10M.pickle") bytes"
for r in $(seq "$runs"); do timed "allocscope summary 10M.pickle (run $r)" "$cli" summary "$work/10M.pickle"; done
timed "anchor: python3 pickle.load(10M.pickle)" python3 -c "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))" "$work/10M.pickle"
