#!/usr/bin/env bash
# Configures and builds mconv into build/ (CUDA parts too when nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
