#!/usr/bin/env bash
# Installs what allocscope needs (Debian 12 packages, then the browser tests' npm packages). Idempotent: it installs
# only what is missing, so running it again is quick.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ ninja-build pkg-config libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev zlib1g-dev
          libsimdjson-dev
          libunwind-dev emscripten clang libclang-rt-14-dev chromium python3
          python3-venv python3-pip python3-setuptools python3-wheel python3-numpy python3-pandas
          python3-nbconvert python3-ipykernel jupyter-nbconvert)
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Browser tests drive Debian's Chromium through playwright-core (no browser download). Reinstall only when the
# lock file changed since the last install.
if [ -f tests/browser/package-lock.json ]; then
  stamp=tests/browser/node_modules/.allocscope-installed
  if [ ! -f "$stamp" ] || [ tests/browser/package-lock.json -nt "$stamp" ]; then
    echo "setup: npm ci (tests/browser)"
    npm ci --prefix tests/browser --no-audit --no-fund --loglevel=error
    touch "$stamp"
  fi
fi
echo "setup: ok"
