#!/usr/bin/env bash
# On the GPU machine: Python frames end to end. (1) the oracle test and the hook's cost on this machine's Python;
# (2) the owners jobs (PyTorch, PyTorch with its caching allocator off, CuPy, JAX, PyTorch DDP on NCCL) under `allocscope record`, and for
# each the share of the bytes at the peak whose site is a line of the job's own script (site_share.py).
# PyTorch's recorder stays off (ALLOCSCOPE_TORCH_RECORDER=0): the share is the capture's own, with the frames the
# bootstrap's backward wrapper lends to the autograd engine's threads.
# usage: [JOBS="torch nccl"] tests/capture/pyframes/run_gpu.sh STAGE_DIR OUT_DIR
set -u
. "$(dirname "$0")/../stage_env.sh" "$1" "$2"
here=tests/capture/pyframes
echo "== oracle: $(python3 --version)"
python3 $here/python_frames_test.py "$S/liballocscope_python_shim.so" 2>&1 | tail -8
echo "== hook cost"
python3 $here/python_frames_test.py "$S/liballocscope_python_shim.so" --bench | tee "$O/bench.json"
for job in ${JOBS:-torch torch_nocache cupy jax nccl}; do
  script=${job%_nocache}_job.py
  env=()
  [ "$job" = torch_nocache ] && env=(PYTORCH_NO_CUDA_MEMORY_CACHING=1)
  echo "== $job"
  /usr/bin/time -f "$job: %e s wall" env "${env[@]}" ALLOCSCOPE_TORCH_RECORDER=0 "$S/allocscope" record -o "$O/$job.pickle.gz" -- \
    python3 tests/capture/owners/$script "$O/$job.label.json" 2>&1 | tail -3
  /usr/bin/time -f "$job bare: %e s wall" env "${env[@]}" python3 tests/capture/owners/$script /tmp/$job.bare.json 2>&1 | tail -1
  python3 -c "import gzip, pickle, sys; s = pickle.load(gzip.open(sys.argv[1])); print('pickle.load:', len(s['device_traces'][0]), 'trace entries; python_frames =', repr(s['allocator_settings']['allocscope_capture'].get('python_frames')))" "$O/$job.pickle.gz"
  python3 $here/site_share.py "$S/allocscope" "$O/$job.pickle.gz" "$script" | tee "$O/$job.share.json"
  "$S/allocscope" peak "$O/$job.pickle.gz" --top 5 2>&1 | head -40
  "$S/allocscope" summary "$O/$job.pickle.gz" 2>&1 | grep -i -A12 "owner" | head -14
done
rm -f /tmp/*.bare.json
ls -la "$O"
# One file to bring back (the device returns a handful of files per run).
tar cf "$O.tar" -C "$O" . && echo "bundled in $O.tar"
