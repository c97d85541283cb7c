#!/usr/bin/env bash
# Fills .carry/ (git-ignored) with what scripts/gpu-check.sh needs on the GPU machine and that
# machine lacks: Debian packages of ISMRMRD and pugixml, and the real dataset when it is present.
# With a commit as argument it also puts that version's tree in .carry/previous, for
# `gpu-check.sh ab` (the chain benchmarks of both versions side by side on one machine).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .carry/debs .carry/data
(cd .carry/debs && apt-get download libismrmrd1.8 libismrmrd-dev libpugixml1v5 libpugixml-dev)
# OpenSSL (TLS of server and client, and the CLI the TLS tests make certificates with): used there
# only when that machine has none of its own (gpu-check.sh).
(cd .carry/debs && apt-get download libssl-dev libssl3 openssl)
if [ -d ../shared/data/gadgetron-grappa-r3 ]; then
  cp -r ../shared/data/gadgetron-grappa-r3 .carry/data/
fi
if [ $# -ge 1 ]; then
  rm -rf .carry/previous && mkdir -p .carry/previous
  git archive "$1" | tar -x -C .carry/previous
  git rev-parse --short "$1" > .carry/previous/COMMIT
fi
du -sh .carry
