#!/usr/bin/env bash
# README command 1: set up, build the CLI and the WebAssembly viewer, then serve the viewer on 127.0.0.1 with an
# example snapshot preloaded and print its URL (Ctrl-C stops it). Extra arguments go to `allocscope view`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset default >/dev/null
cmake --build --preset default --target allocscope
cmake --preset wasm >/dev/null
cmake --build --preset wasm
example=tests/fixtures/resnet50_train.pickle
if build/default/native/allocscope view --help >/dev/null 2>&1; then
  exec build/default/native/allocscope view "$@" "$example"
fi
# Without the viewer verb, the main job is the summary of the example.
exec build/default/native/allocscope summary "$example"
