#!/usr/bin/env bash
# README command 2: set up, then build and run every suite: native (default), ASan+UBSan (asan), ThreadSanitizer on
# the capture recorder (tsan), WebAssembly under node and the viewer in headless Chromium (wasm), the Python package
# installed by pip into fresh virtual environments, with a Jupyter notebook (python: needs default and wasm built),
# bounded fuzzing (fuzz). Any failure stops the run with a non-zero exit.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

presets=(default asan tsan wasm python fuzz)
[ $# -gt 0 ] && presets=("$@")
# Each suite's time is printed: CI has 90 minutes on 2 cores, and which suite grew is the first thing to know.
times=()
for preset in "${presets[@]}"; do
  echo "=== ${preset}"
  start=${SECONDS}
  if [ "${preset}" = python ]; then
    tests/python/run.sh
  else
    cmake --workflow --preset "${preset}"
  fi
  times+=("${preset} $((SECONDS - start)) s")
  echo "=== ${preset} passed in $((SECONDS - start)) s"
done
echo "all suites passed: $(IFS=,; echo "${times[*]}" | sed 's/,/, /g')"
