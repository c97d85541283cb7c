#!/usr/bin/env bash
# Larmor's CPU CG-SENSE side by side with BART's `pics -l2 -i 30` on the same data, machine and run
# (bench/cg_sense_vs_bart.cpp); prints a Markdown table. Arguments go to the program, e.g.
#   bash scripts/bart-compare.sh --json bart.json          (--coils 8,32 --runs 5 --keep)
# BUILD_DIR (default build) is configured CPU-only when it does not exist yet.
#
# OMP_WAIT_POLICY: both tools use OpenMP, and on 2 cores the policy moves BART's time by up to ~40 %
# (libgomp's default spinning slows BART's pics; PASSIVE speeds it up and slows Larmor slightly).
# PASSIVE, the setting that favours BART, is exported so that both tools run under it.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v bart > /dev/null; then
  echo "bart-compare: 'bart' is not on PATH; install BART (Debian: apt-get install bart)" >&2
  exit 1
fi
BUILD=${BUILD_DIR:-build}
if [ ! -f "$BUILD/build.ninja" ] && [ ! -f "$BUILD/Makefile" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLARMOR_ENABLE_CUDA=OFF -DLARMOR_BUILD_TESTS=OFF
fi
cmake --build "$BUILD" -j "$(nproc)" --target cg_sense_vs_bart
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
exec "$BUILD/bench/cg_sense_vs_bart" "$@"
