#!/usr/bin/env bash
# Installs the dependencies, builds Larmor, starts a server on loopback, streams an undersampled
# scan through the CG-SENSE chain (config/cg_sense.pbtxt) with larmor-client and writes the images
# (ISMRMRD HDF5 + PNG) to ./demo-out. The dataset is the real R=3 scan in ../shared/data when
# present, else a generated phantom (R=3, 24 ACS lines, 8 coils, with a noise scan).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
OUTDIR=$PWD/demo-out
mkdir -p "$OUTDIR"
DATA=../shared/data/gadgetron-grappa-r3/meas_MID00349_FID09273_SNR_R3.h5
if [ ! -f "$DATA" ]; then
  DATA=$OUTDIR/phantom.h5
  ./build/tools/larmor-phantom -o "$DATA" --dims 2 --matrix 256 --coils 8 --oversampling 2 --snr 40 --noise-scan \
    --accel 3 --acs 24
fi
PORT=${LARMOR_DEMO_PORT:-9002}
./build/server/larmor-server --port "$PORT" --address 127.0.0.1 --config-dir config > "$OUTDIR/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q "listening on" "$OUTDIR/server.log" && break; sleep 0.2; done
./build/tools/larmor-client -a 127.0.0.1 -p "$PORT" -f "$DATA" -c cg_sense -o "$OUTDIR/images.h5" -G demo --png "$OUTDIR/png"
echo "Images written: $OUTDIR/images.h5 (group /demo) and $OUTDIR/png/"
ls "$OUTDIR/png"
