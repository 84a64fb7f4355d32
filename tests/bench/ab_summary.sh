#!/usr/bin/env bash
# Interleaved A/B of whole-process `allocscope summary` between builds, on the 1M-event fixture (inflated, or FILE):
# this machine's speed drifts by 10-30% within minutes, so two builds are only compared run against run, in turn.
# Prints the median and quartiles of each binary's wall time, then Python's pickle.load of the same file (the anchor
# of issue 12) three times.
# usage: tests/bench/ab_summary.sh RUNS BINARY_A BINARY_B... [-- FILE]
#   e.g. git worktree add /tmp/old 2f00a85 && (cd /tmp/old && cmake --preset default && cmake --build build/default)
#        tests/bench/ab_summary.sh 30 /tmp/old/build/default/native/allocscope build/default/native/allocscope
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=$1
shift
bins=()
file=""
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then file=$2; break; fi
  bins+=("$1")
  shift
done
work=$(mktemp -d /tmp/allocscope_ab.XXXXXX)
trap 'rm -rf "$work"' EXIT
if [ -z "$file" ]; then
  file=$work/1M.pickle
  gunzip -c tests/fixtures/gpt2_big_1M.pickle.gz >"$file"
  sync "$file"
fi
echo "machine: $(nproc) cores, $(date -u '+%F %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg), file $file"
for r in $(seq "$runs"); do
  for b in "${bins[@]}"; do
    s=$(date +%s%N)
    "$b" summary "$file" >/dev/null
    e=$(date +%s%N)
    echo "$b $(((e - s) / 1000))"
  done
done >"$work/times"
python3 - "$work/times" <<'PY'
import statistics as st, sys
runs = {}
for line in open(sys.argv[1]):
    b, us = line.split()
    runs.setdefault(b, []).append(int(us) / 1e6)
for b, v in runs.items():
    q = st.quantiles(v, n=4)
    print(f"{b}: median {st.median(v):.3f} s (p25 {q[0]:.3f}, p75 {q[2]:.3f}, min {min(v):.3f}), {len(v)} runs")
PY
for i in 1 2 3; do
  /usr/bin/time -f "anchor: python3 pickle.load %e s" python3 -c "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))" "$file"
done
