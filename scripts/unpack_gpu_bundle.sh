#!/usr/bin/env bash
# Unpacks the library that scripts/stage_gpu_bundle.sh packed into the bundle folder $1 (default
# .gpu-bundle): .xz with xz, or Python's lzma where the machine has no xz; .gz with gunzip.
set -u
B=${1:-.gpu-bundle}
for packed in "$B"/*.xz; do
  [ -e "$packed" ] || continue
  if command -v xz > /dev/null; then
    xz -d -f "$packed"
  else
    python3 -c 'import lzma, os, shutil, sys
src = sys.argv[1]
with lzma.open(src) as f, open(src[:-3], "wb") as out: shutil.copyfileobj(f, out, 1 << 24)
os.chmod(src[:-3], 0o755); os.remove(src)' "$packed"
  fi
done
for packed in "$B"/*.gz; do [ -e "$packed" ] && gunzip -f "$packed"; done
exit 0
