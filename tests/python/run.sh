#!/usr/bin/env bash
# The Python package as a user gets it: a wheel built by pip from this tree (reusing the default and wasm builds, so
# nothing compiles twice), installed into fresh virtual environments (one with Debian's numpy, pandas and Jupyter
# visible, one bare), its tests run in each, then a notebook executed by a real Jupyter kernel and its output opened
# in Chromium. Needs build/default and build/wasm (scripts/test-all.sh builds them first).
# usage: tests/python/run.sh        (PYTHON=... picks the interpreter; default Debian's /usr/bin/python3)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PY=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d /tmp/allocscope-python.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export ALLOCSCOPE_BUILD_DIR=${ALLOCSCOPE_BUILD_DIR:-$ROOT/build/default}
export ALLOCSCOPE_SITE_DIR=${ALLOCSCOPE_SITE_DIR:-$ROOT/build/wasm/site}
[ -x "$ALLOCSCOPE_BUILD_DIR/native/allocscope" ] || { echo "no native build in $ALLOCSCOPE_BUILD_DIR"; exit 1; }
[ -f "$ALLOCSCOPE_SITE_DIR/allocscope.wasm" ] || { echo "no viewer site in $ALLOCSCOPE_SITE_DIR"; exit 1; }

echo "== build the wheel ($("$PY" --version))"
"$PY" -m venv --system-site-packages "$tmp/sys"
"$tmp/sys/bin/pip" wheel -q --no-build-isolation --no-deps -w "$tmp/wheels" "$ROOT" > "$tmp/wheel.log" 2>&1 ||
  { cat "$tmp/wheel.log"; exit 1; }
ls "$tmp/wheels"
"$tmp/sys/bin/pip" install -q --no-index "$tmp"/wheels/allocscope-*.whl
"$PY" -m venv "$tmp/plain"
"$tmp/plain/bin/pip" install -q --no-index "$tmp"/wheels/allocscope-*.whl

export ALLOCSCOPE_CLI=$ALLOCSCOPE_BUILD_DIR/native/allocscope ALLOCSCOPE_FIXTURES=$ROOT/tests/fixtures
for v in sys plain; do
  echo "== tests, installed in a fresh venv ($v)"
  (cd "$tmp" && "$tmp/$v/bin/python" -m unittest discover -s "$ROOT/tests/python" -p 'test_*.py')
done

# The wheel is one for every CPython 3: the other versions this machine has (pyenv's, or on PATH) run the tests too.
for v in 3.10 3.12 3.13; do
  other=""
  for cand in $(ls "${PYENV_ROOT:-$HOME/.pyenv}"/versions/$v*/bin/python$v 2>/dev/null) $(command -v "python$v"); do
    if "$cand" -c 'import venv' >/dev/null 2>&1; then other=$cand; break; fi  # a pyenv shim may not run
  done
  if [ -z "$other" ]; then echo "== Python $v: not on this machine, skipped"; continue; fi
  echo "== tests on Python $v ($other)"
  "$other" -m venv "$tmp/py$v"
  "$tmp/py$v/bin/pip" install -q --no-index "$tmp"/wheels/allocscope-*.whl
  (cd "$tmp" && "$tmp/py$v/bin/python" -m unittest discover -s "$ROOT/tests/python" -p 'test_*.py')
done

echo "== a notebook, executed by a Jupyter kernel running the installed package"
mkdir -p "$tmp/jupyter/kernels/allocscope-test"
printf '{"argv": ["%s", "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": "allocscope test", "language": "python"}\n' \
  "$tmp/sys/bin/python" > "$tmp/jupyter/kernels/allocscope-test/kernel.json"
"$tmp/sys/bin/python" tests/python/make_notebook.py "$ROOT/tests/fixtures/resnet50_train.pickle" "$tmp/nb.ipynb"
(cd "$tmp" && JUPYTER_PATH="$tmp/jupyter" "$tmp/sys/bin/python" -m nbconvert --to html --execute \
  --ExecutePreprocessor.kernel_name=allocscope-test --ExecutePreprocessor.timeout=120 nb.ipynb --output nb.html \
  > "$tmp/nbconvert.log" 2>&1) || { cat "$tmp/nbconvert.log"; exit 1; }
mkdir -p build/python-artifacts
node tests/python/notebook_check.js "$tmp/nb.html" build/python-artifacts/notebook.png
echo "python: all passed"
