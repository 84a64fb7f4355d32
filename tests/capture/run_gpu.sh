#!/usr/bin/env bash
# Runs the capture library's GPU checks and benchmarks on a GPU machine from a staged build (see docs/capture.md):
# CPU tests, the GPU test (linked and injected), PyTorch's _memory_viz and our CLI on the result, a PyTorch training
# step under `allocscope record`, and the per-event / dump benchmarks.
# usage: tests/capture/run_gpu.sh STAGE_DIR OUT_DIR [--tests-only]   (--tests-only: stop after the tests and the
# PyTorch tools on their snapshots; no training step, no benchmarks)
set -u
S=$(cd "$1" && pwd)
O=$2
TESTS_ONLY=${3:-}
mkdir -p "$O"
LDP=""
for d in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib64 /usr/local/cuda-13.0/targets/x86_64-linux/lib; do
  [ -d "$d" ] && LDP="$LDP$d:"
done
export LD_LIBRARY_PATH="$LDP$S"
# libdw (elfutils) gives frames file:line; use the machine's, else the copy staged from the build machine.
if ldconfig -p | grep -q "libdw.so.1"; then echo "libdw: the machine's"; else
  echo "libdw: staged copy"; export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$S/dw"; fi
echo "== machine"
nvidia-smi -L
python3 -c 'import torch; print("torch", torch.__version__)'
ldd "$S/liballocscope_capture.so" | grep -E "cupti|unwind|not found"
echo "== CPU tests"
"$S/capture_tests" --gtest_brief=1 2>&1 | tail -3
echo "== GPU tests"
ALLOCSCOPE_CLI_PATH="$S/allocscope" ALLOCSCOPE_GPU_TEST_KEEP="$O" "$S/capture_gpu_tests" 2>&1 | tee "$O/gpu_tests.log" | tail -60
echo "== allocscope stats on the injected snapshot"
"$S/allocscope" stats "$O/injected.pickle" 2>&1 | head -20
echo "== PyTorch _memory_viz on the injected snapshot"
python3 -m torch.cuda._memory_viz stats "$O/injected.pickle" 2>&1 | head -12
python3 -m torch.cuda._memory_viz trace_plot "$O/injected.pickle" -o "$O/injected_trace.html" 2>&1 | tail -3
ls -la "$O/injected_trace.html"
echo "== PyTorch reads the job snapshots (late start, exit with live allocations, fork) and the trim annotation"
for f in late_start exit_live fork_linked fork_injected; do
  python3 -c 'import pickle,sys; d=pickle.load(open(sys.argv[1],"rb")); t=d["device_traces"][0]
print(sys.argv[1].split("/")[-1], len(t), "trace entries,", len(d["segments"]), "segments, actions",
      sorted({e["action"] for e in t}))' "$O/$f.pickle" 2>&1 | tail -2
done
python3 -c 'import pickle,sys; d=pickle.load(open(sys.argv[1],"rb"))
print([a["name"] for a in d["external_annotations"] if "TrimTo" in a["name"]][:2])
print(d["allocator_settings"]["allocscope_capture"]["memory_pools"], d["allocator_settings"]["allocscope_capture"]["pool_trims"])
print(sorted({(e["user_metadata"].split(" ")[0], e["stream"]) for e in d["device_traces"][0] if "_ptsz" in e["user_metadata"]}))' \
  "$O/injected.pickle" 2>&1 | tail -4
[ "$TESTS_ONLY" = "--tests-only" ] && exit 0
echo "== PyTorch training step under allocscope record"
"$S/allocscope" record -o "$O/torch.pickle" -- python3 tests/capture/torch_train_step.py "$O/torch_facts.json"
python3 tests/capture/check_torch_snapshot.py "$O/torch.pickle" "$O/torch_facts.json"
python3 -m torch.cuda._memory_viz stats "$O/torch.pickle" 2>&1 | head -8
echo "== PyTorch with expandable segments (cuMemCreate/cuMemMap) under allocscope record"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$S/allocscope" record -o /tmp/torch_exp.pickle -- \
  python3 tests/capture/torch_train_step.py /tmp/torch_exp.json
python3 tests/capture/check_torch_snapshot.py /tmp/torch_exp.pickle /tmp/torch_exp.json --expandable
echo "== dump on signal and on OOM under allocscope record"
"$S/allocscope" record -o /tmp/torch_oom.pickle --no-dump-at-exit --dump-signal USR1 -- \
  python3 tests/capture/torch_oom_signal.py /tmp/torch_oom.pickle
python3 tests/capture/check_oom_signal.py /tmp/torch_oom.pickle
echo "== benchmarks"
bash tests/capture/bench_gpu.sh "$S" 5
"$S/bench_capture" --ab 9 --depth 40 --iters 100000
"$S/bench_capture_dump"
