#!/usr/bin/env bash
# Larmor's CPU l1-wavelet SENSE (FISTA, 50 iterations) side by side with BART's `pics -l1 -i 50` on the
# same Poisson-disc data, coil maps, machine and run (bench/pics_l1_vs_bart.cpp): a lambda sweep per
# tool with NRMSE against the truth, then times; prints Markdown tables. Arguments go to the program, e.g.
#   bash scripts/bart-l1-compare.sh --json bart-l1.json          (--runs 3 --bart PATH --keep)
# BUILD_DIR (default build) is configured CPU-only when it does not exist yet.
#
# OMP_WAIT_POLICY: both tools use OpenMP, and on 2 cores the policy moves BART's time by up to ~40 %
# (scripts/bart-compare.sh); PASSIVE, the setting that favours BART, is exported so that both tools
# run under it.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v bart > /dev/null; then
  echo "bart-l1-compare: 'bart' is not on PATH; install BART (Debian: apt-get install bart)" >&2
  exit 1
fi
BUILD=${BUILD_DIR:-build}
if [ ! -f "$BUILD/build.ninja" ] && [ ! -f "$BUILD/Makefile" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLARMOR_ENABLE_CUDA=OFF -DLARMOR_BUILD_TESTS=OFF
fi
cmake --build "$BUILD" -j "$(nproc)" --target pics_l1_vs_bart
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
exec "$BUILD/bench/pics_l1_vs_bart" "$@"
