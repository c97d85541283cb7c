#!/usr/bin/env bash
# Installs the dependencies, builds Larmor and runs every test (CTest; GPU tests skip without a GPU):
# the README's test command. CI (.ci/run) runs this, then the hardening stages (scripts/ci-hardening.sh:
# soak, fuzzers, ASan/UBSan and TSan suites), which are also run by hand from the README.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
# The soak (label "soak") runs alone in the hardening run: it measures the server's memory.
(cd build && ctest --output-on-failure -j "$(nproc)" --timeout 900 -LE soak)
