#!/usr/bin/env bash
# On the GPU machine: `allocscope record` of PyTorch jobs writes ONE merged snapshot (PyTorch's own plus the memory
# outside PyTorch's allocator, docs/capture.md "One snapshot of everything"): merged_check.py compares it with
# PyTorch's file (kept here with ALLOCSCOPE_KEEP_TORCH_SNAPSHOT=1) through PyTorch's own _memory_viz; an OOM job run
# the default way leaves only the merged file, dumped on the OOM and at exit.
# usage: tests/capture/pyframes/run_merged_gpu.sh STAGE_DIR OUT_DIR
set -u
. "$(dirname "$0")/../stage_env.sh" "$1" "$2"
here=tests/capture/pyframes
for job in torch nccl; do
  echo "== $job"
  ALLOCSCOPE_KEEP_TORCH_SNAPSHOT=1 /usr/bin/time -f "$job recorded: %e s wall" "$S/allocscope" record \
    -o "$O/$job.pickle" -- python3 tests/capture/owners/${job}_job.py "$O/$job.label.json" 2>&1 | grep -v "^{" | tail -5
  python3 $here/merged_check.py "$S/allocscope" "$O/$job.pickle" "$O/$job.torch.pickle" "$O/$job.label.json"
  "$S/allocscope" summary "$O/$job.pickle" 2>&1 | head -30
  rm -f "$O"/*.html
done
echo "== oom (default: one file)"
"$S/allocscope" record -o "$O/oom.pickle.gz" -- python3 $here/oom_job.py 2>&1 | tail -8
ls "$O"/oom*
python3 -c "
import pickle, gzip
m = pickle.load(gzip.open('$O/oom.pickle.gz'))
o = m['allocscope_outside']
print('merged: PyTorch oom entries', sum(1 for tr in m['device_traces'] for e in tr if e['action'] == 'oom'),
      '| outside entries', sum(len(t) for t in o['device_traces']))
"
"$S/allocscope" oom "$O/oom.pickle.gz" 2>&1 | head -12
viz=$(python3 -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'utils/viz/MemoryViz.js'))")
echo "== MemoryViz.js unpickler opcodes (SETITEM 's' is the one the merge adds at the top level)"
grep -n -i "setitem\|case 's'\|0x73" "$viz" | head -10
which node nodejs 2>&1 | head -2
for f in "$O"/*.pickle; do gzip -f "$f"; done
ls -la "$O"
tar cf "$O.tar" -C "$O" . && echo "bundled in $O.tar"
