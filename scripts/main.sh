#!/usr/bin/env bash
# The main job: build, then `mconv bench` on the built-in resnet50 suite (GPU if present, CPU otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
exec build/tools/mconv bench "$@"
