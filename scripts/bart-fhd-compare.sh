#!/usr/bin/env bash
# Larmor's exact adjoint NUDFT (FHd) and its Toeplitz CG reconstruction side by side with BART's
# `nufft -a -s` (its DFT) and `pics -l2 -t` on the same data, machine and run (bench/fhd_vs_bart.cpp:
# 128^2, one coil, 128 radial spokes x 256 samples, 30 CG iterations by default); prints a Markdown
# table, both problems' lambda and the images' agreement. Arguments go to the program, e.g.
#   bash scripts/bart-fhd-compare.sh --size 128 --spokes 128 --samples 256 --iterations 30 --lambda 0.01 --runs 5
# BUILD_DIR (default build) is configured CPU-only when it does not exist yet. Both tools run on
# OMP_NUM_THREADS threads (default 2, the comparison's setting) under the same OMP_WAIT_POLICY
# (default PASSIVE, as scripts/bart-compare.sh: the setting that favours BART); the program runs
# bart through the shell, so bart inherits both.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v bart > /dev/null; then
  echo "bart-fhd-compare: 'bart' is not on PATH; install BART (Debian: apt-get install bart)" >&2
  exit 1
fi
BUILD=${BUILD_DIR:-build}
if [ ! -f "$BUILD/build.ninja" ] && [ ! -f "$BUILD/Makefile" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLARMOR_ENABLE_CUDA=OFF -DLARMOR_BUILD_TESTS=OFF
fi
# The tree may be shared: build only this target, under the same lock as other builders.
flock /tmp/larmor-build.lock cmake --build "$BUILD" -j "$(nproc)" --target fhd_vs_bart
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
exec "$BUILD/bench/fhd_vs_bart" "$@"
