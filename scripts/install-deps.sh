#!/usr/bin/env bash
# Installs Larmor's build and test dependencies from Debian 12 packages (root, apt).
# The CUDA toolkit is not a Debian package: when /usr/local/cuda/bin/nvcc exists the build uses it.
# libssl-dev: TLS of larmor-server and larmor-client; openssl: the TLS tests make their certificates with it.
# clang-14 builds the fuzz targets only: libclang-rt-14-dev holds libFuzzer and the sanitizer runtimes
# (libclang_rt.fuzzer*), libomp-14-dev clang's OpenMP.
# python3-kubernetes: the offline validation of the Kubernetes manifests (scripts/validate-k8s.py).
# libdcmtk-dev: DICOM output (DicomFinish); dcmtk (dcmdump) and dicom3tools (dciodvfy) check it in the tests.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends \
  build-essential cmake ninja-build pkg-config python3 \
  libboost-dev libboost-system-dev libismrmrd-dev libprotobuf-dev protobuf-compiler \
  libgtest-dev libgmock-dev libbenchmark-dev libfftw3-dev libopenblas-dev liblapacke-dev \
  libspdlog-dev libcli11-dev libhdf5-dev libpugixml-dev libpng-dev zlib1g-dev libssl-dev openssl \
  clang-14 libclang-rt-14-dev libomp-14-dev python3-kubernetes \
  libdcmtk-dev dcmtk dicom3tools
