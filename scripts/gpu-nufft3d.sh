#!/usr/bin/env bash
# The 3D NUFFT against cuFINUFFT in one call (issue 23 item 4), after `gpu-check.sh` has built
# build-gpu on the same warm machine: the CUDA NUFFT tests, then Larmor's 3D forward and adjoint
# (nufft_bench cases 2 and 5; 2D cases 3 and 4 beside them, which must stay ahead), each stage alone with the pruned and the unpruned grid FFT, the
# convolution kernels alone with every method (nufft_kernels_bench case 2), and cuFINUFFT's cuperftest
# (.carry/peers, scripts/build-cufinufft.sh) at the same sizes (3D: 128^3, 2.1 M points, 8 transforms),
# 1e-3 and 1e-5, in the same call. Results land in $OUT (nufft3d.tgz and a summary on stdout).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-gpu}
B=$BUILD/bench
W=/tmp/larmor-nufft3d && rm -rf "$W" && mkdir -p "$W"
export LD_LIBRARY_PATH=/tmp/larmor-pfx/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
run() { local name=$1; shift; timeout "${STEP_TIMEOUT:-200}" "$@" > "$W/$name.txt" 2>&1 || echo "$name: exit $?" | tee -a "$W/errors.txt"; }
if [ "${NUFFT_TESTS:-1}" = 1 ]; then
  (cd "$BUILD" && ctest --output-on-failure -j4 --timeout 300 -R "Nufft|nufft|Noncart|Radial|Gridding|Toeplitz") > "$W/ctest.txt" 2>&1
  grep -E "tests passed|tests failed|\*\*\*Failed|\*\*\*Timeout" "$W/ctest.txt" | tail -12
fi
reps="--benchmark_repetitions=${REPS:-3} --benchmark_report_aggregates_only=true"
run nufft3d "$B/nufft_bench" '--benchmark_filter=(NufftAdjointGpu|NufftForwardGpu)/case:[2345]/' --benchmark_min_time=0.3 $reps --benchmark_out="$W/nufft3d.json"
run stages "$B/nufft_bench" '--benchmark_filter=NufftStagesGpu/case:5/' --benchmark_min_time=0.1 $reps --benchmark_out="$W/stages.json"
run kernels "$B/nufft_kernels_bench" '--benchmark_filter=(NufftSpread|NufftInterp)/2/' --benchmark_min_time=0.1 $reps --benchmark_out="$W/kernels.json"
# The previous version's operator beside it (the build gpu-check.sh ab left, or a fresh one of .carry/previous).
PREV=/tmp/larmor-build-previous
if [ "${NUFFT_PREVIOUS:-1}" = 1 ] && [ -d "$ROOT/.carry/previous" ]; then
  [ -f "$PREV/build.ninja" ] || cmake -S "$ROOT/.carry/previous" -B "$PREV" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="/tmp/larmor-pfx/usr;/tmp/larmor-pfx/usr/lib/x86_64-linux-gnu/cmake" -DLARMOR_BUILD_TESTS=OFF \
    -DCMAKE_LIBRARY_PATH=/tmp/larmor-pfx/usr/lib/x86_64-linux-gnu -DCMAKE_CUDA_ARCHITECTURES="90-real;90-virtual" > "$W/cmake-previous.log" 2>&1
  ninja -C "$PREV" -j16 bench/nufft_bench > "$W/build-previous.log" 2>&1 &&
    run nufft3d_previous "$PREV/bench/nufft_bench" '--benchmark_filter=(NufftAdjointGpu|NufftForwardGpu)/case:[2345]/' \
      --benchmark_min_time=0.3 $reps --benchmark_out="$W/nufft3d_previous.json"
fi
CUPERF=$ROOT/.carry/peers/cuperftest
if [ -x "$CUPERF" ]; then
  # Larmor's cases 3, 4, 5 (uniform random points, as cuperftest draws them)
  CUPERF_TIMEOUT=60 bash "$ROOT/scripts/run-cufinufft.sh" "$W/cufinufft.txt" <<'CASES'
schiwietz 256 256 1 258048 3
golden32 256 256 1 205824 32
3d 128 128 128 2097152 8
CASES
  python3 "$ROOT/scripts/cufinufft_table.py" "$W/cufinufft.txt"
fi
for f in nufft3d nufft3d_previous stages kernels; do [ -f "$W/$f.txt" ] && { echo "== $f"; grep -hE "_median" "$W/$f.txt" | cut -c1-170; }; done
tar czf "${OUT:-/tmp}/nufft3d.tgz" -C "$W" .
