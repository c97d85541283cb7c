#!/usr/bin/env bash
# Installs the dependencies, builds Larmor and runs every test (CTest). GPU tests skip without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" --timeout 900
