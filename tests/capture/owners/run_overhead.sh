#!/usr/bin/env bash
# On the GPU machine: per-iteration cost of `allocscope record` on a PyTorch training loop (torch_overhead.py: median
# and p90 of 50 synchronized steps), 3 rounds of: bare; the default (capture with Python frames, PyTorch's own recorder
# on, one merged snapshot at exit); PyTorch's recorder off (ALLOCSCOPE_TORCH_RECORDER=0: the capture and its lent
# backward frames); --no-torch (no bootstrap at all).
# usage: tests/capture/owners/run_overhead.sh STAGE_DIR OUT_DIR
set -u
. "$(dirname "$0")/../stage_env.sh" "$1" "$2"
job=tests/capture/owners/torch_overhead.py
for round in 1 2 3; do
  echo "bare:             $(python3 $job | tail -1)"
  echo "default (merged): $("$S/allocscope" record -o "$O/ov.pickle" -- python3 $job 2>/dev/null | tail -1)"
  echo "recorder off:     $(ALLOCSCOPE_TORCH_RECORDER=0 "$S/allocscope" record -o "$O/ov.pickle" -- python3 $job 2>/dev/null | tail -1)"
  echo "--no-torch:       $("$S/allocscope" record --no-torch -o "$O/ov.pickle" -- python3 $job 2>/dev/null | tail -1)"
done
rm -f "$O/ov.pickle"
