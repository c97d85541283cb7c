#!/usr/bin/env bash
# Builds cuFINUFFT's `cuperftest` (flatironinstitute/finufft v2.5.1), the GPU NUFFT Larmor is measured
# against (bench/RESULTS.md), offline from local clones, and puts the binary in .carry/peers/ so that
# scripts/gpu-check.sh can run it on the GPU machine in the same call as Larmor's benchmarks. A peer
# to measure, never a dependency: nothing of Larmor links it. Steps from ../shared/docs/peers.md.
# Usage: scripts/build-cufinufft.sh <finufft git dir> <CPM.cmake git dir>
set -euo pipefail
FINUFFT_GIT=${1:?finufft repository (git dir or clone)}
CPM_GIT=${2:?CPM.cmake repository (git dir or clone)}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/tmp/cufinufft-build}
rm -rf "$WORK" && mkdir -p "$WORK/src" "$WORK/build/cmake"
git --git-dir="$FINUFFT_GIT" archive v2.5.1 | tar -x -C "$WORK/src"
# CPM is fetched by finufft's CMake at configure time; give it the file it would download.
git --git-dir="$CPM_GIT" show v0.42.0:cmake/CPM.cmake > "$WORK/build/cmake/CPM_0.42.0.cmake"
# CCCL comes from the CUDA toolkit (3.0.1 in CUDA 13.0) instead of a download.
cmake -S "$WORK/src" -B "$WORK/build" -DFINUFFT_USE_CUDA=ON -DFINUFFT_USE_CPU=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DBUILD_TESTING=ON -DFINUFFT_BUILD_TESTS=ON -DCPM_USE_LOCAL_PACKAGES=ON -DCUDA12_CCCL_VERSION=3.0.1 \
  -DCCCL_DIR=/usr/local/cuda/lib64/cmake/cccl -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
  > "$WORK/cmake.log" 2>&1 || { tail -30 "$WORK/cmake.log"; exit 1; }
cmake --build "$WORK/build" -j "$(nproc)" --target cuperftest > "$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log"; exit 1; }
mkdir -p "$ROOT/.carry/peers"
cp "$WORK/build/perftest/cuda/cuperftest" "$ROOT/.carry/peers/"
echo "cuperftest -> $ROOT/.carry/peers/cuperftest ($(du -h "$ROOT/.carry/peers/cuperftest" | cut -f1))"
