#!/usr/bin/env bash
# The 1,000-rank benchmark: N rank files made from a real snapshot (small per-rank differences, three planted
# outliers: tests/bench/rank_files.h), then `allocscope ranks DIR` with 1 and 2 workers (wall time, max RSS), the
# fleet reduce (`summary --json` per rank, then `ranks` on the summaries), whether the three planted outliers are
# exactly the ones found, and Python's pickle.load of the same files as the anchor, all in one run.
# usage: tests/bench/bench_ranks.sh [BUILD_DIR=build/default] [N=1000] [BASE=tests/fixtures/ddp_rank0.pickle]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/default}
n=${2:-1000}
base=${3:-tests/fixtures/ddp_rank0.pickle}
cli=$build/native/allocscope
work=$(mktemp -d /tmp/allocscope_bench_ranks.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(date -u '+%F %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
"$build/tests/bench/make_rank_files" "$base" "$work/ranks" "$n"
gz=$(du -cb "$work"/ranks/*.pickle.gz | tail -1 | cut -f1)
raw=$(python3 -c "
import gzip,glob,sys
print(sum(len(gzip.open(f).read()) for f in glob.glob(sys.argv[1]+'/*.pickle.gz')))" "$work/ranks")
echo "input: $n files from $base, $((gz / 1000000)) MB gzip, $((raw / 1000000)) MB inflated"

timed() {  # label, then the command; prints wall seconds, max RSS and CPU
  local label=$1
  shift
  /usr/bin/time -f "%e %M %U %S" -o "$work/time" "$@"
  read -r wall rss user sys <"$work/time"
  printf '%-44s %7.2f s wall  %7.1f MB max RSS  (user %.2f s, sys %.2f s)\n' "$label" "$wall" "$((rss))e-3" "$user" "$sys"
}

for jobs in 1 2; do
  timed "allocscope ranks DIR --json --jobs $jobs" sh -c "'$cli' ranks '$work/ranks' --json --jobs $jobs > '$work/ranks$jobs.json'"
done
cmp -s "$work/ranks1.json" "$work/ranks2.json" && echo "same answer with 1 and 2 workers" || echo "DIFFERENT answers with 1 and 2 workers"

mkdir -p "$work/sums"
timed "summary --json per rank ($n processes, 1 at a time)" sh -c "
  for f in '$work'/ranks/*.pickle.gz; do b=\$(basename \"\$f\" .pickle.gz); '$cli' summary --json --top 20 \"\$f\" > '$work/sums/'\$b.json; done"
timed "allocscope ranks SUMMARIES --json (reduce)" sh -c "'$cli' ranks '$work/sums' --json > '$work/reduce.json'"

python3 - "$work" <<'EOF'
import json, sys
w = sys.argv[1]
planted = json.load(open(w + "/ranks/planted.jsonl"))
want = {o["rank"]: o["kind"] for o in planted["outliers"]}
for name in ("ranks2.json", "reduce.json"):
    r = json.load(open(w + "/" + name))
    got = [row for row in r["rows"] if row.get("outlier")]
    ok = sorted(x["rank"] for x in got) == sorted(want)
    print(f"{name}: {r['readable']}/{r['files']} read, outliers {[x['rank'] for x in got]} "
          f"(planted {sorted(want)}): {'FOUND EXACTLY' if ok else 'WRONG'}")
    for x in got:
        more = x["holds_more"][0]["site"] + " +" + str(x["holds_more"][0]["bytes"] >> 20) + " MiB" if x["holds_more"] else "-"
        flags = [k[8:] for k in x if k.startswith("outlier_") and x[k]]
        print(f"  rank {x['rank']} ({want.get(x['rank'], 'not planted')}): outlier on {flags}; holds more: {more}")
EOF

timed "anchor: python3 pickle.load of every file" python3 -c "
import gzip, glob, pickle, sys
for f in sorted(glob.glob(sys.argv[1] + '/*.pickle.gz')):
    with gzip.open(f) as fh: pickle.load(fh)" "$work/ranks"
