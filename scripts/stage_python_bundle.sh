#!/usr/bin/env bash
# Builds the Python package as a wheel here, with the CUDA executors (no GPU needed), and stages it with
# the test and model-benchmark dependencies the GPU machine lacks into .py-bundle/ (git-ignored), which
# a device call carries. The wheel holds no Python extension module (the operator library uses
# LibTorch's stable ABI), so one built with this Python installs into the GPU machine's.
# PYTHON: an interpreter with torch >= 2.10 (default python3). DEVICE_PY: the GPU machine's Python
# version, for the downloaded wheels (default 3.12).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
rm -rf .py-bundle && mkdir -p .py-bundle
"$PYTHON" -m pip wheel -q --no-build-isolation --no-deps -Cbuild-dir=build-py/cuda -w .py-bundle .
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version "${DEVICE_PY:-3.12}" \
  --platform manylinux_2_28_x86_64 -d .py-bundle/deps "torchvision==0.26.*" pytest pluggy iniconfig packaging
du -sh .py-bundle
