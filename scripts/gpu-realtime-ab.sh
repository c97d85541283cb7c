CTEST_ARGS="-R NoSuchTest" bash scripts/gpu-check.sh tests > /dev/null 2>&1
export LD_LIBRARY_PATH=/tmp/larmor-pfx/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
L=/tmp/larmor-pfx/usr/lib/x86_64-linux-gnu
cmake -S .carry/previous -B /tmp/prev -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="/tmp/larmor-pfx/usr;$L/cmake" -DCMAKE_LIBRARY_PATH="$L" -DLARMOR_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES="90-real;90-virtual" > /tmp/prev-cmake.log 2>&1
ninja -C /tmp/prev -j16 bench/realtime_radial_bench server/larmor-server > /tmp/prev-build.log 2>&1 || tail -5 /tmp/prev-build.log
for round in 1 2 3; do for side in previous current; do
  exe=build-gpu/bench/realtime_radial_bench; [ $side = previous ] && exe=/tmp/prev/bench/realtime_radial_bench
  $exe --benchmark_format=json --benchmark_out=/tmp/rt.json > /dev/null 2>&1
  echo "$side $round $(grep -hE '"(frames_per_s|latency_median_us|latency_p99_us|latency_max_us)"' /tmp/rt.json | tr -d ' \n')"
done; done
