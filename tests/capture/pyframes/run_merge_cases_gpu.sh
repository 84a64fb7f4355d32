#!/usr/bin/env bash
# On the GPU machine: the two merges an audit (2026-11-26) found wrong, on real jobs. (1) A long job whose PyTorch
# trace ring holds only steps long after the capture's last cudaMalloc must still merge (it was refused as "another
# run"). (2) With expandable segments and `--stacks none`, PyTorch's cuMemMap pages must not count as memory outside
# PyTorch (the capture sees one map per page, PyTorch one segment_map per range): the outside bytes must match the
# run with stacks, whose owners are read from frames. merged_check.py compares each merged file with PyTorch's own.
# usage: tests/capture/pyframes/run_merge_cases_gpu.sh STAGE_DIR OUT_DIR
set -u
. "$(dirname "$0")/../stage_env.sh" "$1" "$2"
here=tests/capture/pyframes
ldconfig -p | grep -q "libdw.so.1" || export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$S/dw"
echo "== steady: PyTorch's ring (2000 entries) holds only the late steps"
ALLOCSCOPE_KEEP_TORCH_SNAPSHOT=1 "$S/allocscope" record --max-entries 2000 -o "$O/steady.pickle" -- \
  python3 tests/capture/owners/steady_job.py "$O/steady.label.json" 2>&1 | tail -4
python3 $here/merged_check.py "$S/allocscope" "$O/steady.pickle" "$O/steady.torch.pickle" "$O/steady.label.json"
"$S/allocscope" merge --help >/dev/null 2>&1
for stacks in python none; do
  echo "== expandable segments, --stacks $stacks"
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True ALLOCSCOPE_KEEP_TORCH_SNAPSHOT=1 "$S/allocscope" record \
    --stacks $stacks -o "$O/exp_$stacks.pickle" -- python3 tests/capture/owners/torch_job.py "$O/exp_$stacks.label.json" \
    2>&1 | tail -3
  python3 $here/merged_check.py "$S/allocscope" "$O/exp_$stacks.pickle" "$O/exp_$stacks.torch.pickle" \
    "$O/exp_$stacks.label.json"
  "$S/allocscope" summary "$O/exp_$stacks.pickle" 2>&1 | grep -i -A3 "by owner"
done
echo "== oom, --stacks none"
"$S/allocscope" record --stacks none -o "$O/oom_none.pickle" -- python3 $here/oom_job.py 2>&1 | tail -3
python3 -c "
import pickle
m = pickle.load(open('$O/oom_none.pickle', 'rb'))
o = m.get('allocscope_outside') or {'device_traces': []}
print('PyTorch oom entries', sum(1 for tr in m['device_traces'] for e in tr if e['action'] == 'oom'),
      '| outside oom entries', sum(1 for tr in o['device_traces'] for e in tr if e['action'] == 'oom'))
"
for f in "$O"/*.pickle; do gzip -f "$f"; done
ls -la "$O"
