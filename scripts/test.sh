#!/usr/bin/env bash
# Build, then every test (GPU tests skip with a message where there is no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cd build && ctest --output-on-failure -j"$(nproc)"
