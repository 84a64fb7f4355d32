#!/usr/bin/env bash
# On the GPU machine: the owners check's jobs under `allocscope record` (PyTorch, CuPy, JAX), each writing its
# library's own counters as a label beside the snapshot, then `allocscope summary` of each.
# usage: tests/capture/owners/run.sh STAGE_DIR OUT_DIR
set -u
. "$(dirname "$0")/../stage_env.sh" "$1" "$2"
nvidia-smi -L
for job in torch cupy jax; do
  echo "== $job"
  /usr/bin/time -f "$job: %e s wall" "$S/allocscope" record -o "$O/$job.pickle.gz" -- \
    python3 tests/capture/owners/${job}_job.py "$O/$job.label.json" 2>&1 | tail -5
  echo "-- without capture (overhead)"
  /usr/bin/time -f "$job bare: %e s wall" python3 tests/capture/owners/${job}_job.py /tmp/$job.bare.json 2>&1 | tail -1
  "$S/allocscope" summary "$O/$job.pickle.gz" 2>&1 | head -40
done
ls -la "$O"
