#!/usr/bin/env bash
# Builds the CUDA configuration here (no GPU needed) and stages the binaries the device run needs
# into .gpu-bundle/ (git-ignored), which the device call carries.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-gpu -DMCONV_NATIVE=OFF -DMCONV_BUILD_TESTS=ON -DMCONV_BUILD_TOOLS=ON > /dev/null
cmake --build build-gpu -j"$(nproc)"
rm -rf .gpu-bundle && mkdir -p .gpu-bundle
cp -P build-gpu/libmconv.so* build-gpu/tools/mconv build-gpu/tests/mconv_gpu_tests build-gpu/tests/mconv_tests \
  build-gpu/bench/mconv_host_overhead build-gpu/bench/mconv_copy_floor .gpu-bundle/
# The device call carries at most 64 MiB with the source tree; the stripped library alone is ~56 MB,
# so it travels gzipped (~33 MB) and gpu_run.sh / ncu_layers.sh unpack it.
strip --strip-unneeded .gpu-bundle/* 2> /dev/null || true
gzip -6 .gpu-bundle/libmconv.so.*.*.*
du -sh .gpu-bundle
