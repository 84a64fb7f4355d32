#!/usr/bin/env bash
# On the GPU machine, second batch of the capture checks: per-iteration overhead on a PyTorch loop (bare, stacks
# none, native stacks; 3 rounds each), a 3-rank torchrun job under `allocscope record` (files named by rank, none for
# the launcher, `allocscope ranks` on them), and the PyTorch job with the caching allocator off.
# usage: tests/capture/owners/run2.sh STAGE_DIR OUT_DIR
set -u
. "$(dirname "$0")/../stage_env.sh" "$1" "$2"
R=$(pwd)
echo "== per-iteration overhead (median/p90 ms of 50 steps)"
for round in 1 2 3; do
  echo "bare:   $(python3 tests/capture/owners/torch_overhead.py | tail -1)"
  echo "none:   $("$S/allocscope" record --stacks none -o /tmp/ov_none.pickle -- python3 tests/capture/owners/torch_overhead.py 2>/dev/null | tail -1)"
  echo "native: $("$S/allocscope" record -o /tmp/ov_native.pickle -- python3 tests/capture/owners/torch_overhead.py 2>/dev/null | tail -1)"
done
echo "== torchrun, 3 ranks on one GPU, default output names"
mkdir -p "$O/ranks" && cd "$O/ranks"
"$S/allocscope" record -- torchrun --nproc_per_node=3 "$R/tests/capture/owners/ranks_job.py" 2>&1 | grep -v "^W1\|OMP_NUM" | tail -12
ls -la "$O/ranks"
"$S/allocscope" ranks "$O/ranks" 2>&1 | head -30
cd "$R"
echo "== PyTorch with the caching allocator off"
PYTORCH_NO_CUDA_MEMORY_CACHING=1 "$S/allocscope" record -o "$O/torch_nocache.pickle.gz" -- \
  python3 tests/capture/owners/torch_job.py "$O/torch_nocache.label.json" 2>&1 | tail -2
"$S/allocscope" summary "$O/torch_nocache.pickle.gz" 2>&1 | sed -n '1,20p'
