#!/usr/bin/env bash
# The non-Cartesian GPU figures of bench/RESULTS.md in one short call, after `gpu-check.sh tests` has
# built build-gpu on the same machine: real-time radial through the server, radial FBP, the NUFFT
# adjoint/forward and the gridding reconstruction (2D cases), and cuFINUFFT's cuperftest at the same
# 2D sizes in the same call. Everything lands in $OUT/quick.tgz (the device returns few files).
# QUICK_3D=1: the 3D cases instead (Larmor's nufft_bench cases 2 and 5, cuFINUFFT at 128^3, 2.1 M
# points, 8 transforms) and the interpolation kernels alone (nufft_kernels_bench, both methods).
# QUICK_STAGES=1: each stage of the forward and adjoint alone (nufft_bench BM_NufftStagesGpu, cases 4
# and 5), and cuFINUFFT at the tolerances CUFI_TOLS (e.g. "1e-4 1e-6": the kernel widths Larmor uses
# at 1e-3 and 1e-5) for the 2D 32-coil and 3D cases.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${BUILD:-$ROOT/build-gpu}/bench
W=/tmp/larmor-quick && rm -rf "$W" && mkdir -p "$W"
export LD_LIBRARY_PATH=/tmp/larmor-pfx/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
run() { local name=$1; shift; timeout "${STEP_TIMEOUT:-150}" "$@" > "$W/$name.txt" 2>&1 || echo "$name: exit $?" >> "$W/errors.txt"; }
if [ "${QUICK_STAGES:-0}" = 1 ]; then
  run stages "$B/nufft_bench" '--benchmark_filter=NufftStagesGpu|NufftForwardGpu/case:5/tol_exp:5' \
    --benchmark_min_time=0.05 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_out="$W/stages.json"
  CASES_3D="golden32 256 256 1 205824 32
3d 128 128 128 2097152 8"
elif [ "${QUICK_3D:-0}" = 1 ]; then
  run kernels "$B/nufft_kernels_bench" '--benchmark_filter=NufftInterp' --benchmark_min_time=0.1 \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_out="$W/kernels.json"
  run nufft3d "$B/nufft_bench" '--benchmark_filter=(NufftAdjointGpu|NufftForwardGpu)/case:[25]/' \
    --benchmark_min_time=0.3 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_out="$W/nufft3d.json"
  CASES_3D="3d 128 128 128 2097152 8"
else
run realtime "$B/realtime_radial_bench" --benchmark_format=json --benchmark_out="$W/realtime.json"
run fbp "$B/radial_fbp_bench" --benchmark_filter=Gpu --benchmark_min_time=0.2 --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true --benchmark_out="$W/fbp.json"
run nufft "$B/nufft_bench" '--benchmark_filter=(NufftAdjointGpu|NufftForwardGpu)/case:[0134]/|GriddingRecon' \
  --benchmark_min_time=0.1 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_out="$W/nufft.json"
fi
CUPERF=$ROOT/.carry/peers/cuperftest
if [ -x "$CUPERF" ]; then
  TOLS=${CUFI_TOLS:-1e-3 1e-5} CUPERF_TIMEOUT=60 bash "$ROOT/scripts/run-cufinufft.sh" "$W/cufinufft.txt" <<CASES
${CASES_3D:-schiwietz 256 256 1 258048 3
golden32 256 256 1 205824 32}
CASES
  python3 "$ROOT/scripts/cufinufft_table.py" "$W/cufinufft.txt"
fi
grep -hE "manual_time_median|_median|frames_per_s|latency" "$W"/*.txt | cut -c1-160
tar czf "${OUT:-/tmp}/quick.tgz" -C "$W" .
