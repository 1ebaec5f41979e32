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
# BUNDLE_SLIM=1 leaves out the CPU tests and the host benchmarks (the carry is near its limit).
[ -n "${BUNDLE_SLIM:-}" ] && rm -f .gpu-bundle/mconv_tests .gpu-bundle/mconv_host_overhead .gpu-bundle/mconv_copy_floor
# The device call carries at most 64 MiB with the source tree, and the stripped library is ~76 MB
# (its fatbins mostly compressed already): it travels as xz -9e (~52 MB; gzip -6 read ~62 MB) and
# scripts/unpack_gpu_bundle.sh unpacks it there.
strip --strip-unneeded .gpu-bundle/* 2> /dev/null || true
xz -9e -T0 .gpu-bundle/libmconv.so.*.*.*
du -sh .gpu-bundle
