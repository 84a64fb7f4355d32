#!/usr/bin/env bash
# The Python module on the GPU machine (issue 41's proof): install the wheel built here (WHEEL) with the machine's
# pip into a folder, check its native files load there, run the module's tests on that Python, then the GPU
# scenarios (scenarios.py) and `allocscope record` from the installed package. Results and snapshots go to OUT.
# usage: tests/python/gpu/run_gpu.sh WHEEL OUT
set -u
WHEEL=$1
OUT=$2
mkdir -p "$OUT/runs"
export PYTHONUNBUFFERED=1
echo "== machine"
nvidia-smi -L
python3 -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)'
SITE=/tmp/allocscope-site
rm -rf "$SITE"
python3 -m pip install -q --no-index --no-deps --target "$SITE" "$WHEEL" || exit 1
export PYTHONPATH=$SITE PATH=$SITE/bin:$PATH
D=$SITE/allocscope/_data
echo "== native files"
for f in "$D/bin/allocscope" "$D/lib/liballocscope.so" "$D/lib/liballocscope_capture.so"; do
  echo "$(basename "$f"): $(ldd "$f" | grep -cE 'not found') missing; $(ldd "$f" | grep -E 'cupti|unwind' | tr -s ' ' | tr '\n' ';')"
done
echo "== module tests on this Python"
(cd /tmp && ALLOCSCOPE_CLI=$D/bin/allocscope ALLOCSCOPE_FIXTURES=$OLDPWD/tests/fixtures \
  python3 -m unittest discover -s "$OLDPWD/tests/python" -p 'test_*.py' 2>&1 | tail -8) | tee "$OUT/unittest.log"
echo "== scenarios"
timeout 520 python3 tests/python/gpu/scenarios.py "$OUT/runs" 2>&1 | tee "$OUT/scenarios.log"
echo "== allocscope record, from the installed package"
allocscope record -o "$OUT/runs/cli_record.pickle.gz" -- python3 -c \
  'import torch; x = torch.randn(4096, 4096, device="cuda"); y = x @ x; torch.cuda.synchronize()' 2>&1 | tail -5
allocscope summary "$OUT/runs/cli_record.pickle.gz" 2>&1 | head -20
mv "$OUT/runs/python_gpu.jsonl" "$OUT/" 2>/dev/null
rm -rf "$OUT/runs/hf_tmp"
tar czf "$OUT/snapshots.tgz" -C "$OUT/runs" . && rm -rf "$OUT/runs"
ls -la "$OUT"
