#!/usr/bin/env bash
# On a two-GPU machine: the DDP job on NCCL as two ranks of `torchrun --nproc_per_node=2`, under `allocscope record`.
# (1) the default mode, PyTorch's file kept: each rank's merged snapshot checked against PyTorch's own by
#     merged_check.py, its summary, and `allocscope ranks` on the two; (2) PyTorch's recorder off: the capture's own
#     share of bytes at the peak whose site is the script (site_share.py); (3) the per-step time of 60 steps, bare and
#     recorded, 3 rounds. Output: OUT_DIR/merged, OUT_DIR/lent, logs, bundled in OUT_DIR.tar.
# usage: [ROUNDS=3] tests/capture/owners/run_nccl2.sh STAGE_DIR OUT_DIR
set -u
. "$(dirname "$0")/../stage_env.sh" "$1" "$2"
job=tests/capture/owners/nccl_job.py
here=tests/capture/pyframes
nvidia-smi -L
nvidia-smi topo -m 2>&1 | head -4
echo "== (0) the bootstrap's wrappers (torch.distributed's collectives lend frames; torch.compile's table agrees)"
"$S/allocscope" record -o /tmp/probe.pickle -- python3 -c "
import sys, torch
print('torch.distributed imported by import torch:', 'torch.distributed' in sys.modules)
import torch.distributed as dist, torch.distributed.distributed_c10d as c10d
import torch.distributed._functional_collectives as fc
print('lend:', {n: getattr(getattr(dist, n), '_allocscope_lends', False) for n in
      ('all_reduce', 'broadcast', 'all_gather_into_tensor', 'barrier', 'new_group', '_broadcast_coalesced',
       '_verify_params_across_processes', 'get_rank')})
print('c10d and dist agree:', c10d.all_reduce is dist.all_reduce, c10d.broadcast is dist.broadcast)
import torch.distributed.device_mesh as dm
print('bound by name before the bootstrap saw torch, now wrapped:',
      {n: getattr(dm.__dict__.get(n), '_allocscope_lends', None) for n in ('new_group', 'init_process_group', 'split_group')})
remaps = getattr(fc, 'traceable_collective_remaps', {})
print('compile remaps keys are dist functions:', len(remaps), all(k is getattr(dist, k.__name__, None) for k in remaps))
" 2>&1 | tail -6
# The job as two torchrun ranks under `allocscope record`, into OUT/DIR/rank%r.EXT with its labels beside.
# usage: record_ranks DIR EXT PORT (environment for `record` set by the caller)
record_ranks() {
  mkdir -p "$O/$1"
  "$S/allocscope" record -o "$O/$1/rank%r.$2" -- torchrun --nproc_per_node=2 --master_port=$3 $job \
    "$O/$1/rank%r.label.json" 2>&1 | grep -v "^W1\|OMP_NUM" | tail -8
  ls -la "$O/$1"
}
echo "== (1) default mode, 2 ranks, PyTorch's file kept"
ALLOCSCOPE_KEEP_TORCH_SNAPSHOT=1 record_ranks merged pickle 29611
for r in 0 1; do
  echo "-- rank $r"
  python3 $here/merged_check.py "$S/allocscope" "$O/merged/rank$r.pickle" "$O/merged/rank$r.torch.pickle" \
    "$O/merged/rank$r.label.json" | tee "$O/merged/rank$r.check.json"
  python3 $here/site_share.py "$S/allocscope" "$O/merged/rank$r.pickle" nccl_job.py | tee "$O/merged/rank$r.share.json"
  "$S/allocscope" summary "$O/merged/rank$r.pickle" 2>&1 | head -40
  rm -f "$O"/merged/*.html
done
"$S/allocscope" ranks "$O/merged" 2>&1 | head -20
echo "== (2) PyTorch's recorder off: the capture's own stacks"
ALLOCSCOPE_TORCH_RECORDER=0 record_ranks lent pickle.gz 29612
for r in 0 1; do
  echo "-- rank $r"
  python3 $here/site_share.py "$S/allocscope" "$O/lent/rank$r.pickle.gz" nccl_job.py | tee "$O/lent/rank$r.share.json"
  "$S/allocscope" peak "$O/lent/rank$r.pickle.gz" --top 6 2>&1 | head -30
  "$S/allocscope" summary "$O/lent/rank$r.pickle.gz" 2>&1 | grep -i -B2 -A12 "owner" | head -18
done
echo "== (3) per-step time, 60 steps (median ms of the last 59 per rank)"
for round in $(seq "${ROUNDS:-3}"); do
  STEPS=60 torchrun --nproc_per_node=2 --master_port=29613 $job /tmp/ov_bare.%r.json >/dev/null 2>&1
  STEPS=60 "$S/allocscope" record -o /tmp/ov.rank%r.pickle -- \
    torchrun --nproc_per_node=2 --master_port=29614 $job /tmp/ov_rec.%r.json >/dev/null 2>&1
  python3 -c "
import json
for kind in ('bare', 'rec'):
    print('round $round', kind, [round(json.load(open(f'/tmp/ov_{kind}.{r}.json'))['step_ms_median'], 3) for r in (0, 1)])"
done
rm -f /tmp/ov_*.json /tmp/ov.rank*.pickle
for f in "$O"/merged/*.pickle; do gzip -f "$f"; done
ls -la "$O"/merged "$O"/lent
tar cf "$O.tar" -C "$O" . && echo "bundled in $O.tar"
