#!/usr/bin/env bash
# On the GPU machine: `allocscope record` on PyTorch jobs with no code change turns on PyTorch's recorder through the
# bootstrap and writes PyTorch's snapshot beside the capture (torch_pair_check.py checks the pair), also on OOM.
# usage: tests/capture/pyframes/run_torch_gpu.sh STAGE_DIR OUT_DIR
set -u
. "$(dirname "$0")/../stage_env.sh" "$1" "$2"
here=tests/capture/pyframes
for job in torch nccl; do
  echo "== $job"
  /usr/bin/time -f "$job recorded: %e s wall" "$S/allocscope" record -o "$O/$job.pickle.gz" -- \
    python3 tests/capture/owners/${job}_job.py "$O/$job.label.json" 2>&1 | grep -v "^{" | tail -4
  python3 $here/torch_pair_check.py "$S/allocscope" "$O/$job.pickle.gz" "$O/$job.torch.pickle" "$O/$job.label.json"
  "$S/allocscope" summary "$O/$job.torch.pickle" 2>&1 | head -30
done
echo "== oom"
"$S/allocscope" record -o "$O/oom.pickle.gz" -- python3 $here/oom_job.py 2>&1 | tail -6
python3 -c "
import pickle, gzip, sys
t = pickle.load(open('$O/oom.torch.pickle', 'rb'))
print('torch snapshot: oom entries', sum(1 for tr in t['device_traces'] for e in tr if e['action'] == 'oom'))
c = pickle.load(gzip.open('$O/oom.pickle.gz'))
print('capture: oom entries', sum(1 for tr in c['device_traces'] for e in tr if e['action'] == 'oom'))
"
"$S/allocscope" oom "$O/oom.torch.pickle" 2>&1 | head -20
ls -la "$O"
tar cf "$O.tar" -C "$O" . && echo "bundled in $O.tar"
