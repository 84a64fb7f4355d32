#!/usr/bin/env bash
# On a two-GPU machine: NCCL's own account of its device memory as the oracle for the bytes the capture calls NCCL's.
# The DDP job runs as two torchrun ranks under `allocscope record` (PyTorch's recorder off) with NCCL_DEBUG=INFO
# NCCL_DEBUG_SUBSYS=ALLOC, which makes NCCL log its allocations; the log is kept beside the snapshots. Then the per-step
# time of 200 steps, bare and recorded, alternated 5 times.
# usage: tests/capture/owners/run_nccl2_log.sh STAGE_DIR OUT_DIR
set -u
. "$(dirname "$0")/../stage_env.sh" "$1" "$2"
job=tests/capture/owners/nccl_job.py
echo "== NCCL's allocation log, 2 ranks"
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ALLOC NCCL_DEBUG_FILE="$O/nccl.%h.%p.log" ALLOCSCOPE_TORCH_RECORDER=0 \
  "$S/allocscope" record -o "$O/rank%r.pickle.gz" -- \
  torchrun --nproc_per_node=2 --master_port=29621 $job "$O/rank%r.label.json" 2>&1 | grep -v "^W1\|OMP_NUM" | tail -4
ls -la "$O"
grep -h -i "alloc\|cumem\|size" "$O"/nccl.*.log | sed 's/^[^ ]* //' | cut -c1-160 | sort | uniq -c | sort -rn | head -40
echo "== per-step time, 200 steps (median ms of the last 199, per rank)"
for round in 1 2 3 4 5; do
  STEPS=200 torchrun --nproc_per_node=2 --master_port=29623 $job /tmp/ov_bare.%r.json >/dev/null 2>&1
  STEPS=200 "$S/allocscope" record -o /tmp/ov.rank%r.pickle -- \
    torchrun --nproc_per_node=2 --master_port=29624 $job /tmp/ov_rec.%r.json >/dev/null 2>&1
  python3 -c "
import json
print('round $round', ' '.join('%s %s' % (k, [round(json.load(open(f'/tmp/ov_{k}.{r}.json'))['step_ms_median'], 3) for r in (0, 1)]) for k in ('bare', 'rec')))"
done
rm -f /tmp/ov_*.json /tmp/ov.rank*.pickle
tar cf "$O.tar" -C "$O" . && echo "bundled in $O.tar"
