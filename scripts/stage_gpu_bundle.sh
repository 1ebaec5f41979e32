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
du -sh .gpu-bundle
