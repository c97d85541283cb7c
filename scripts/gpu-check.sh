#!/usr/bin/env bash
# Builds Larmor with CUDA on the lent GPU machine, runs the whole test suite there (the GPU tests
# run for real) and the benchmarks, and prints a short table. One call does everything, because
# device time is scarce. Usage from the lead machine (device tool):
#   run: bash scripts/gpu-check.sh        carry: [".carry"]
# .carry/ holds what that machine lacks (scripts/prepare-gpu-carry.sh fills it): the Debian packages
# of ISMRMRD and pugixml, and the real dataset. Everything else (CUDA 13, Boost, protobuf, FFTW,
# OpenBLAS/LAPACKE, spdlog, CLI11, HDF5, gtest, benchmark) is on that machine already.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FINAL=${OUT:-/tmp/larmor-out}
OUT=/tmp/larmor-work   # everything lands here; $FINAL gets a few files (the device returns at most 8)
PFX=/tmp/larmor-pfx
# In the repository (git-ignored), so a second call on the same warm machine reuses the build.
BUILD=${BUILD:-$ROOT/build-gpu}
# all | tests | bench | nufft (the NUFFT/FBP benchmarks and cuFINUFFT beside them) | ab (tests, bench,
# then the previous version's chain benchmarks) | sanitize
# (compute-sanitizer memcheck and racecheck over the CUDA tests, nothing else)
MODE=${1:-all}
# GPU benchmarks only by default: the CPU ones take minutes there and are measured on the CI-class
# machine instead (bench/RESULTS.md).
BENCH_FILTER=${BENCH_FILTER:-GPU|Gpu|Cuda|Bare|Device|Realtime}
mkdir -p "$OUT" "$FINAL" "$PFX"
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
L=$PFX/usr/lib/x86_64-linux-gnu

# 1. Unpack the carried packages into a private prefix (never into /), and point their
#    pkg-config files at it.
for deb in "$ROOT"/.carry/debs/*.deb; do
  case $(basename "$deb") in  # OpenSSL only where the machine lacks it: never two libcrypto in one process
    libssl-dev_* | libssl3_*) [ -f /usr/include/openssl/ssl.h ] && continue ;;
    openssl_*) command -v openssl > /dev/null && continue ;;
  esac
  dpkg -x "$deb" "$PFX"
done
[ -x "$PFX/usr/bin/openssl" ] && export PATH=$PATH:$PFX/usr/bin
find "$PFX" -name '*.pc' -exec sed -i "s#=/usr#=$PFX/usr#g; s#-I/usr#-I$PFX/usr#g; s#-L/usr#-L$PFX/usr#g" {} +
# Debian's ISMRMRD CMake targets name absolute Debian library paths (curl, crypto, szip) that the
# ISMRMRD library does not need for what Larmor uses; keep HDF5 and pugixml only.
sed -i "s#INTERFACE_LINK_LIBRARIES \".*\"#INTERFACE_LINK_LIBRARIES \"/usr/lib/x86_64-linux-gnu/hdf5/serial/libhdf5.so;$L/libpugixml.so\"#" \
  "$L/cmake/ISMRMRD/ISMRMRDTargets.cmake"
export PKG_CONFIG_PATH=$L/pkgconfig:/usr/lib/x86_64-linux-gnu/pkgconfig:/usr/share/pkgconfig
export LD_LIBRARY_PATH=$L:${LD_LIBRARY_PATH:-}

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"

# 2. Build (all cores).
t0=$(date +%s)
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PFX/usr;$L/cmake" -DCMAKE_LIBRARY_PATH="$L" \
  -DLARMOR_SHARED_DATA_DIR="$ROOT/.carry/data" -DCMAKE_CUDA_ARCHITECTURES="90-real;90-virtual" \
  > "$OUT/cmake.log" 2>&1 || { tail -40 "$OUT/cmake.log"; exit 1; }
# NINJA_TARGETS: build only these (a short call that runs a few tests and benchmarks); default all.
ninja -C "$BUILD" -j16 ${NINJA_TARGETS:-} > "$OUT/build.log" 2>&1 || { grep -E "error|Error" "$OUT/build.log" | head -40; tail -20 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"

status=0
# 3. Tests: everything, so the GPU tests run for real next to the CPU ones. Four tests at a time,
#    each with four OpenMP threads that sleep when idle: 16 spinning threads per CPU test on 16
#    cores, four tests at once, made the CPU tests crawl (seen 2026-11-24).
#    The soak (a resident-memory measurement) runs afterwards on its own, as in CI: beside three other
#    tests its peak moved by 3.6-3.8 MiB against its 2 MiB margin, alone by 0.5 MiB (H200, 2026-11-28).
if [ "$MODE" != bench ] && [ "$MODE" != sanitize ] && [ "$MODE" != tsan ] && [ "$MODE" != nufft ]; then
  (cd "$BUILD" && export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
     ctest --output-on-failure -j4 --timeout 600 -LE soak ${CTEST_ARGS:-}; rest=$?
     ctest --output-on-failure --timeout 900 -L soak ${CTEST_ARGS:-}; soak=$?
     exit $((rest | soak))) > "$FINAL/ctest.log" 2>&1 || status=1
  grep -E "tests passed|tests failed|\*\*\*Failed|\*\*\*Timeout|Not Run" "$FINAL/ctest.log" | tail -25
fi

# 4a. The peer GPU NUFFT, cuFINUFFT's cuperftest (scripts/build-cufinufft.sh puts it in .carry/peers), in
#     the same call as Larmor's NUFFT benchmarks below (first, so a call cut short still has it): the same sizes, tolerances and batch (uniform
#     random points, as cuperftest draws them; Larmor's radial cases crowd the centre instead). Methods
#     1 and 2 (GM-sort, SM) both run; the table keeps each one's execute time per call.
CUPERF=$ROOT/.carry/peers/cuperftest
if [ -x "$CUPERF" ] && { [ "$MODE" = all ] || [ "$MODE" = bench ] || [ "$MODE" = nufft ]; }; then
  : > "$OUT/cufinufft.txt"
  # CUFI_CASES: a subset of the cases below (their names), e.g. "3d".
  while read -r name rest; do
    case " ${CUFI_CASES:-schiwietz golden32 3d} " in *" $name "*) echo "$name $rest" ;; esac
  done <<'CASES' | bash "$ROOT/scripts/run-cufinufft.sh" "$OUT/cufinufft.txt"
schiwietz 256 256 1 258048 3
golden32 256 256 1 205824 32
3d 128 128 128 2097152 8
CASES
  cp "$OUT/cufinufft.txt" "$FINAL"/
  python3 "$ROOT/scripts/cufinufft_table.py" "$OUT/cufinufft.txt" | tee "$FINAL/cufinufft.md"
fi
# 4. Benchmarks, JSON per executable, then one table.
if [ "$MODE" != tests ] && [ "$MODE" != sanitize ] && [ "$MODE" != tsan ]; then  # bench, ab, all, nufft
  [ "$MODE" = nufft ] && BENCH_FILTER=${NUFFT_FILTER:-Nufft|NUFFT|Fbp|FBP|Stolt}
  for exe in "$BUILD"/bench/*_bench; do
    [ -x "$exe" ] || continue
    name=$(basename "$exe")
    "$exe" --benchmark_filter="$BENCH_FILTER" --benchmark_format=json --benchmark_out="$OUT/$name.json" \
      --benchmark_out_format=json --benchmark_repetitions=${BENCH_REPS:-7} --benchmark_report_aggregates_only=true \
      > "$OUT/$name.txt" 2>&1 || { echo "$name failed"; tail -5 "$OUT/$name.txt"; status=1; }
  done
  python3 "$ROOT/scripts/bench_table.py" "$OUT"/*_bench.json | tee "$FINAL/table.md"
  cp "$OUT"/cg_sense_bench.json "$FINAL"/ 2>/dev/null
fi
# 5. Side by side with the previous version (.carry/previous, from prepare-gpu-carry.sh <commit>):
#    its build, then the chain benchmarks of both, alternated, on this machine in this call.
if [ "$MODE" = ab ] && [ -d "$ROOT/.carry/previous" ]; then
  PREV=/tmp/larmor-build-previous
  cmake -S "$ROOT/.carry/previous" -B "$PREV" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$PFX/usr;$L/cmake" -DCMAKE_LIBRARY_PATH="$L" -DLARMOR_BUILD_TESTS=OFF \
    -DCMAKE_CUDA_ARCHITECTURES="90-real;90-virtual" > "$OUT/cmake-previous.log" 2>&1 &&
  # The chain benchmarks and the server's throughput on loopback (its own larmor-server beside it),
  # so that a slower ingest path shows as a ratio.
  ninja -C "$PREV" -j16 bench/cartesian_chain_bench bench/server_throughput_bench server/larmor-server \
    > "$OUT/build-previous.log" 2>&1 || { echo "previous build failed"; tail -20 "$OUT/build-previous.log"; }
  AB_FILTER=${AB_FILTER:-CartesianFrame.*GPU|SessionFirstFrame_GPU}
  AB_THROUGHPUT=${AB_THROUGHPUT:-RawSocket|passthrough|cartesian_rss}
  for round in 1 2; do
    for side in current previous; do
      dir=$BUILD; [ $side = previous ] && dir=$PREV
      "$dir/bench/cartesian_chain_bench" --benchmark_filter="$AB_FILTER" --benchmark_format=json --benchmark_out="$OUT/ab_${side}_$round.json" \
        --benchmark_out_format=json --benchmark_repetitions=3 --benchmark_report_aggregates_only=true > /dev/null 2>&1 || echo "$side run $round failed"
      [ -x "$dir/bench/server_throughput_bench" ] && { "$dir/bench/server_throughput_bench" --benchmark_filter="$AB_THROUGHPUT" \
        --benchmark_format=json --benchmark_out="$OUT/ab_${side}_throughput_$round.json" --benchmark_out_format=json \
        --benchmark_repetitions=3 --benchmark_report_aggregates_only=true > /dev/null 2>&1 || echo "$side throughput run $round failed"; }
    done
  done
  echo; echo "Side by side, previous = $(cat "$ROOT/.carry/previous/COMMIT" 2>/dev/null || echo '?'):"
  python3 "$ROOT/scripts/bench_table.py" --ab "$OUT"/ab_current_*.json -- "$OUT"/ab_previous_*.json | tee "$OUT/ab.md"
fi
# 5b. The ThreadSanitizer stage of scripts/ci-hardening.sh, on this machine's 16 quiet cores.
if [ "$MODE" = tsan ]; then
  LARMOR_HARDENING=tsan LARMOR_CMAKE_ARGS="-DCMAKE_PREFIX_PATH=$PFX/usr;$L/cmake -DCMAKE_LIBRARY_PATH=$L" \
    bash "$ROOT/scripts/ci-hardening.sh" > "$FINAL/tsan.log" 2>&1 || status=1
  grep -E "tests passed|tests failed|\*\*\*Failed|\*\*\*Timeout|ThreadSanitizer|hardening:" "$FINAL/tsan.log" | head -40
fi
# 6. compute-sanitizer over the CUDA cases of the test executables that launch kernels: memcheck
#    (out-of-bounds and misaligned accesses, leaks of device memory, API errors) on all of them,
#    racecheck (shared-memory hazards) on those whose kernels use shared memory. One row each.
if [ "$MODE" = sanitize ]; then
  CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  # The CUDA cases, less the one that provokes out-of-memory on purpose (its API errors are the point).
  GPU_FILTER='*cuda*:*Cuda*:*CUDA*:*Gpu*:*GPU*:-*ErrorsNameTheProblem*'
  echo "| test executable | tool | tests run | errors | exit |" | tee "$FINAL/sanitizer.md"
  echo "|---|---|---|---|---|" | tee -a "$FINAL/sanitizer.md"
  run_cs() {
    local tool=$1 t=$2 log=$OUT/cs_$1_$2.log extra=() rc errs ran
    [ "$tool" = memcheck ] && extra=(--leak-check full)
    timeout "${CS_TIMEOUT:-150}" "$CS" --tool "$tool" "${extra[@]}" --error-exitcode 3 "$BUILD/tests/$t" \
      --gtest_filter="$GPU_FILTER" > "$log" 2>&1
    rc=$?
    # memcheck: "ERROR SUMMARY: N errors"; racecheck: "RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)".
    errs=$(grep -oE "ERROR SUMMARY: [0-9]+|\([0-9]+ errors" "$log" | tail -1 | grep -oE "[0-9]+")
    ran=$(grep -oE "\[==========\] [0-9]+ tests? from .* ran" "$log" | grep -oE "[0-9]+" | head -1)
    echo "| $t | $tool | ${ran:-?} | ${errs:-?} | $rc |" | tee -a "$FINAL/sanitizer.md"
    [ "$rc" = 0 ] || status=1
  }
  # CS_MEMCHECK / CS_RACECHECK: other lists (a short call can check only what changed).
  for t in ${CS_MEMCHECK:-core_cuda_backend_test core_blas1_test core_fft_test core_linops_test fault_injection_test \
           core_iter_test core_stream_primitives_test sense_recon_test memory_budget_test core_nufft_test \
           core_nufft_cuda_kernels_test radial_fbp_test core_nudft_test toeplitz_cg_test}; do
    run_cs memcheck "$t"
  done
  for t in ${CS_RACECHECK:-core_blas1_test core_stream_primitives_test core_linops_test core_iter_test \
           core_nufft_cuda_kernels_test radial_fbp_test core_nudft_test}; do
    run_cs racecheck "$t"
  done
  # Only the logs of runs that did not come out clean (the device returns few files).
  for log in "$OUT"/cs_*.log; do grep -qE "ERROR SUMMARY: 0 errors|\(0 errors" "$log" || cp "$log" "$FINAL"/; done
fi
tar czf "$FINAL/results.tgz" -C "$OUT" .
cp "$OUT"/ab.md "$OUT"/device.txt "$FINAL"/ 2>/dev/null
exit $status
