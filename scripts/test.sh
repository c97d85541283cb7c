#!/usr/bin/env bash
# Installs the dependencies, builds Larmor and runs every test (CTest; GPU tests skip without a GPU),
# then the hardening run: soak, fuzzers, ASan/UBSan and TSan suites (scripts/ci-hardening.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
# The soak (label "soak") runs alone in the hardening run: it measures the server's memory.
(cd build && ctest --output-on-failure -j "$(nproc)" --timeout 900 -LE soak)
bash scripts/ci-hardening.sh
