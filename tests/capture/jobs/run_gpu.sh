#!/usr/bin/env bash
# On the GPU machine, issue 39's proof: six jobs nobody here tuned for allocscope (a Hugging Face GPT-2 with bf16
# autocast; Lightning training a timm ResNet; a GPT with checkpointed blocks, a worker DataLoader with pinned memory and
# an EMA thread, healthy and with a planted leak; a JAX MLP; a CuPy FFT job), each run bare and under
# `allocscope record` in the default mode, from the wheel WHEEL installed with this machine's pip. The leaky job runs a
# third time with PyTorch's recorder off (what a copy without its python/ folder records) for the pool-growth verdict.
# For each run, one JSON line in OUT/proof.jsonl (analyse.py: share of peak bytes at the job's own lines, windows'
# coverage, owners against the libraries' counters, leak verdict, per-step overhead); a failure is a line too.
# Snapshots, labels and logs are in OUT/runs.tar. About 5 minutes on an H200.
# usage: tests/capture/jobs/run_gpu.sh WHEEL OUT
set -u
WHEEL=$1
OUT=$(mkdir -p "$2" && cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
R=$OUT/runs
mkdir -p "$R"
: > "$OUT/proof.jsonl"
export PYTHONUNBUFFERED=1
exec > >(tee "$OUT/run.log") 2>&1
echo "== machine"
nvidia-smi -L
python3 -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)'
SITE=/tmp/allocscope-proof-site
rm -rf "$SITE"
if ! python3 -m pip install -q --no-index --no-deps --target "$SITE" "$WHEEL"; then
  echo '{"error": "pip install of the wheel failed"}' >> "$OUT/proof.jsonl"
  exit 1
fi
A=$SITE/allocscope/_data/bin/allocscope
# CUPTI for the capture library in jobs that do not load their own (JAX, CuPy): the toolkit's, or NVIDIA's wheel's.
LDP=""
for d in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib64 \
         $(python3 -c 'import nvidia.cuda_cupti as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null); do
  [ -d "$d" ] && LDP="$LDP$d:"
done
export LD_LIBRARY_PATH="$LDP${LD_LIBRARY_PATH:-}"

# NAME SCRIPT [ARGS...]; RECORD_ENV (optional) prefixes the recorded run's environment; BARE=0 skips the bare run.
run_one() {
  local name=$1 script=$2
  shift 2
  echo "== $name"
  if [ "${BARE:-1}" = 1 ]; then
    timeout 150 python3 "$HERE/$script" "$R/$name.bare.json" "$@" > "$R/$name.bare.log" 2>&1 || echo "$name bare: exit $?"
  fi
  rm -f "$R/$name.pickle.gz"
  timeout 200 env ${RECORD_ENV:-} "$A" record -o "$R/$name.pickle.gz" -- python3 "$HERE/$script" "$R/$name.label.json" "$@" \
    > "$R/$name.record.log" 2>&1
  echo "$name recorded: exit $?"
  grep -E "^allocscope (record|bootstrap|capture)" "$R/$name.record.log" | tail -6
  if [ -f "$R/$name.pickle.gz" ]; then
    timeout 300 python3 "$HERE/analyse.py" "$A" "$R/$name.pickle.gz" --job "$name" --label "$R/$name.label.json" \
      --bare "$R/$name.bare.json" | tee -a "$OUT/proof.jsonl" || echo "{\"job\": \"$name\", \"error\": \"analyse.py failed\"}" >> "$OUT/proof.jsonl"
    "$A" summary "$R/$name.pickle.gz" > "$R/$name.summary.txt" 2>&1
    "$A" leaks "$R/$name.pickle.gz" > "$R/$name.leaks.txt" 2>&1
  else
    echo "{\"job\": \"$name\", \"error\": \"no snapshot written (see $name.record.log)\"}" | tee -a "$OUT/proof.jsonl"
  fi
}

run_one hf_gpt2 hf_gpt2.py
run_one lightning_timm lightning_timm.py
run_one gpt_ckpt gpt_ckpt.py
run_one gpt_ckpt_leak gpt_ckpt.py --leak
# Its bare run is the leaky job's.
cp "$R/gpt_ckpt_leak.bare.json" "$R/gpt_ckpt_leak_capture_only.bare.json" 2>/dev/null
BARE=0 RECORD_ENV=ALLOCSCOPE_TORCH_RECORDER=0 run_one gpt_ckpt_leak_capture_only gpt_ckpt.py --leak
run_one jax_mlp jax_mlp.py
run_one cupy_fft cupy_fft.py
tar cf "$OUT/runs.tar" -C "$R" . && rm -rf "$R"
rm -rf "$SITE"
ls -la "$OUT"
