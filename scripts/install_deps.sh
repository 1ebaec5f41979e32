#!/usr/bin/env bash
# Installs what mconv builds with, from Debian's packages (skips what is already there).
set -euo pipefail
pkgs=(cmake g++ make git libgtest-dev libcli11-dev nlohmann-json3-dev clang-format clang libclang-rt-14-dev libomp-14-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
