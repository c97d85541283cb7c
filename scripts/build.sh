#!/usr/bin/env bash
# Configures and builds Larmor into ./build (CUDA backend when nvcc is found, CPU-only otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${LARMOR_CMAKE_ARGS:-}
cmake --build build -j "$(nproc)"
