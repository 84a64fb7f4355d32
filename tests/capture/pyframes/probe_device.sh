#!/bin/bash
# Which Pythons the GPU machine has, and the interpreter-structure offsets of each that ships its internal headers
# (what python_frames.cpp's per-version tables must equal).
here=$(cd "$(dirname "$0")" && pwd)
for py in $( (readlink -f "$(command -v python3)"; ls /usr/bin/python3* /usr/local/bin/python3* /opt/*/bin/python3* 2>/dev/null) | grep -E 'python3\.[0-9]+$' | sort -u); do
  inc=$($py -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null) || continue
  echo "== $py ($($py -c 'import sys; print(sys.version.split()[0])')) include=$inc"
  if [ -f "$inc/internal/pycore_frame.h" ]; then
    gcc -I"$inc" "$here/offsets.c" -o /tmp/pyoff_$$ 2>&1 | head -5 && /tmp/pyoff_$$; rm -f /tmp/pyoff_$$
  else
    echo "   no internal headers"
  fi
done
