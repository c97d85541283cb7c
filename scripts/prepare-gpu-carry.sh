#!/usr/bin/env bash
# Fills .carry/ (git-ignored) with what scripts/gpu-check.sh needs on the GPU machine and that
# machine lacks: Debian packages of ISMRMRD and pugixml, and the real dataset when it is present.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .carry/debs .carry/data
(cd .carry/debs && apt-get download libismrmrd1.8 libismrmrd-dev libpugixml1v5 libpugixml-dev)
if [ -d ../shared/data/gadgetron-grappa-r3 ]; then
  cp -r ../shared/data/gadgetron-grappa-r3 .carry/data/
fi
du -sh .carry
