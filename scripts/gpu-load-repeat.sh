#!/usr/bin/env bash
# The 32-client load test again and again on the GPU machine, to catch a rare failure, then under
# compute-sanitizer memcheck (the server wrapped via LARMOR_TEST_SERVER_WRAPPER). Builds first
# (gpu-check.sh, only the load test run). Usage (device tool): bash scripts/gpu-load-repeat.sh [N]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${1:-25}
CTEST_ARGS="-R ServerLoad" bash "$ROOT/scripts/gpu-check.sh" tests > /tmp/load-build.txt 2>&1
grep -E "build:|tests passed" /tmp/load-build.txt
cd "${BUILD:-$ROOT/build-gpu}" || exit 1
export LD_LIBRARY_PATH=/tmp/larmor-pfx/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
OUT=${OUT:-/tmp}
for centring in ${CENTRINGS:-default swap}; do
  fails=0
  for i in $(seq 1 "$N"); do
    if [ $centring = swap ]; then export LARMOR_CUDA_CENTRING=swap; else unset LARMOR_CUDA_CENTRING; fi
    ./tests/server_load_test > /tmp/load.txt 2>&1 || { fails=$((fails + 1)); [ -f "$OUT/fail_$centring.txt" ] || cp /tmp/load.txt "$OUT/fail_$centring.txt"; }
  done
  echo "$centring centring: $fails / $N runs failed"
done
unset LARMOR_CUDA_CENTRING
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for i in $(seq 1 "${MEMCHECK_RUNS:-2}"); do
  LARMOR_TEST_SERVER_WRAPPER="$CS --tool memcheck --log-file /tmp/cs-server-$i.log" timeout 250 ./tests/server_load_test > /tmp/cs_load.txt 2>&1
  echo "memcheck run $i: exit $?"
  grep -E "ERROR SUMMARY" /tmp/cs-server-$i.log | tail -1
  grep -qE "ERROR SUMMARY: 0 errors" /tmp/cs-server-$i.log || cp /tmp/cs-server-$i.log "$OUT/"
done
