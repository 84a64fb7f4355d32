#!/usr/bin/env bash
# README command 2: set up, then build and run every suite: native (default), ASan+UBSan (asan), ThreadSanitizer on
# the capture recorder (tsan), WebAssembly under node and the viewer in headless Chromium (wasm), bounded fuzzing
# (fuzz). Any failure stops the run with a non-zero exit.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

presets=(default asan tsan wasm fuzz)
[ $# -gt 0 ] && presets=("$@")
for preset in "${presets[@]}"; do
  echo "=== ${preset}"
  cmake --workflow --preset "${preset}"
done
echo "all suites passed: ${presets[*]}"
