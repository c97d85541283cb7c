#!/usr/bin/env bash
# The status page (larmor-server --http-port, server/http_status.h) in headless Chromium while a session
# runs: writes docs/images/status_page.png (or $1). Needs Debian's chromium (apt-get install chromium),
# which the build does not; run by hand after scripts/build.sh. Two scans are reconstructed first so that
# the counters and the gadget table have something in them, then a 3D l1-SPIRiT session and a 2D scan of
# many repetitions (an image each, so the page has a thumbnail) are started and the page is taken while
# they run.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
OUTPNG=${1:-docs/images/status_page.png}
command -v chromium > /dev/null || { echo "status-page-screenshot: chromium is not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'kill $server 2> /dev/null || true; rm -rf "$tmp"' EXIT
"$B/tools/larmor-phantom" -o "$tmp/r3.h5" --matrix 128 --coils 8 --accel 3 --acs 24 > /dev/null
"$B/tools/larmor-phantom" -o "$tmp/reps.h5" --matrix 128 --coils 8 --repetitions 150 --snr 30 > /dev/null
"$B/tools/larmor-phantom" -o "$tmp/vol.h5" --dims 3 --matrix 128 --matrix-z 64 --coils 8 --sampling poisson \
  --accel 2 --accel-z 2 --acs 24 > /dev/null
"$B/server/larmor-server" --address 127.0.0.1 --port 0 --http-port 0 --backend cpu > "$tmp/out" 2> "$tmp/log" &
server=$!
for _ in $(seq 100); do grep -q "^listening on" "$tmp/out" && break; sleep 0.1; done
port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$tmp/out")
http=$(sed -n 's/^http status on .*:\([0-9]*\)$/\1/p' "$tmp/out")
for chain in cg_sense grappa; do
  "$B/tools/larmor-client" -a 127.0.0.1 -p "$port" -f "$tmp/r3.h5" -c "$chain" -o "$tmp/$chain.h5" > /dev/null
done
"$B/tools/larmor-client" -a 127.0.0.1 -p "$port" -f "$tmp/vol.h5" -c l1spirit_3d -o "$tmp/vol-out.h5" > /dev/null &
client=$!
sleep 2
"$B/tools/larmor-client" -a 127.0.0.1 -p "$port" -f "$tmp/reps.h5" -c cartesian -o "$tmp/reps-out.h5" > /dev/null &
reps=$!
sleep 1
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1000,820 \
  --screenshot="$OUTPNG" "http://127.0.0.1:$http/" 2> "$tmp/chromium.log" || { cat "$tmp/chromium.log" >&2; exit 1; }
kill "$client" "$reps" 2> /dev/null || true
echo "status-page-screenshot: wrote $OUTPNG"
