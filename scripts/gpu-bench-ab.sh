#!/usr/bin/env bash
# One benchmark of the current tree against .carry/previous (scripts/prepare-gpu-carry.sh <commit>), on
# the GPU machine, builds alternated round by round so that clock and thermal drift hit both alike.
# Usage (device tool, after scripts/gpu-check.sh has built build-gpu on the same warm machine, or with
# BUILD_CURRENT=1 to build it here):
#   bash scripts/gpu-bench-ab.sh <bench target> '<benchmark filter>' [rounds]
# Prints one line per round and side: the median real time of each benchmark (ns or the unit it reports).
set -uo pipefail
TARGET=$1 FILTER=$2 ROUNDS=${3:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
L=/tmp/larmor-pfx/usr/lib/x86_64-linux-gnu
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=$L:${LD_LIBRARY_PATH:-}
if [ ! -x "$ROOT/build-gpu/bench/$TARGET" ]; then
  CTEST_ARGS="-R NoSuchTest" bash "$ROOT/scripts/gpu-check.sh" tests > /dev/null 2>&1
fi
cmake -S "$ROOT/.carry/previous" -B /tmp/prev -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="/tmp/larmor-pfx/usr;$L/cmake" \
  -DCMAKE_LIBRARY_PATH="$L" -DLARMOR_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES="90-real;90-virtual" > /tmp/prev-cmake.log 2>&1
ninja -C /tmp/prev -j16 "bench/$TARGET" > /tmp/prev-build.log 2>&1 || { tail -5 /tmp/prev-build.log; exit 1; }
echo "previous = $(cat "$ROOT/.carry/previous/COMMIT" 2>/dev/null || echo '?'); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
for round in $(seq "$ROUNDS"); do for side in previous current; do
  exe=$ROOT/build-gpu/bench/$TARGET; [ $side = previous ] && exe=/tmp/prev/bench/$TARGET
  "$exe" --benchmark_filter="$FILTER" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_format=json --benchmark_out=/tmp/ab.json > /dev/null 2>&1
  python3 - "$side" "$round" /tmp/ab.json <<'PY'
import json, sys
side, rnd, path = sys.argv[1:4]
rows = [b for b in json.load(open(path))["benchmarks"] if b.get("aggregate_name") == "median"]
print(side, rnd, "  ".join(f'{b["run_name"]}={b["real_time"]:.2f}{b["time_unit"]}' for b in rows))
PY
done; done
