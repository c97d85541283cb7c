#!/usr/bin/env bash
# Larmor's CPU NUFFT adjoint side by side with BART's `nufft -a` on the same data, machine and run
# (bench/nufft_vs_bart.cpp: 256^2, radial, 8 coils by default); prints a Markdown table and the
# images' agreement. Arguments go to the program, e.g.
#   bash scripts/bart-nufft-compare.sh --coils 8 --spokes 402 --runs 5 --tolerance 1e-3
# BUILD_DIR (default build) is configured CPU-only when it does not exist yet. Both tools run on
# OMP_NUM_THREADS threads (default 2, the comparison's setting) under the same OMP_WAIT_POLICY
# (default PASSIVE, as scripts/bart-compare.sh: the setting that favours BART).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v bart > /dev/null; then
  echo "bart-nufft-compare: 'bart' is not on PATH; install BART (Debian: apt-get install bart)" >&2
  exit 1
fi
BUILD=${BUILD_DIR:-build}
if [ ! -f "$BUILD/build.ninja" ] && [ ! -f "$BUILD/Makefile" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLARMOR_ENABLE_CUDA=OFF -DLARMOR_BUILD_TESTS=OFF
fi
cmake --build "$BUILD" -j "$(nproc)" --target nufft_vs_bart
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
exec "$BUILD/bench/nufft_vs_bart" "$@"
