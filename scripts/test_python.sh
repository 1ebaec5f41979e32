#!/usr/bin/env bash
# The Python package: a virtual environment in build-py/venv with torch and the test dependencies from
# PyPI (tests/python/requirements.txt), `pip install .` of this checkout into it (CPU-only unless
# MCONV_PY_CUDA=1: the CUDA executors are tested on the GPU machine), then its tests.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=build-py/venv
if [ ! -x "$VENV/bin/python" ]; then
  if ! python3 -c "import venv, ensurepip" 2> /dev/null; then  # Debian's python3 keeps venv apart
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q python3-venv
  fi
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip > /dev/null
echo "== Python: installing the test requirements (torch from PyPI)"
"$VENV/bin/python" -m pip install -q -r tests/python/requirements.txt
echo "== Python: pip install . (CPU-only build)"
cuda=OFF
[ -n "${MCONV_PY_CUDA:-}" ] && cuda=ON
"$VENV/bin/python" -m pip install -q --no-build-isolation -Ccmake.define.MCONV_ENABLE_CUDA=$cuda -Cbuild-dir=build-py/ci .
"$VENV/bin/python" -c "import mconv; print('mconv', mconv.__version__, 'cuda_available', mconv.cuda_available())"
echo "== Python: tests"
cd tests/python && "../../$VENV/bin/python" -m pytest -q -p no:cacheprovider .
