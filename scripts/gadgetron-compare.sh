#!/usr/bin/env bash
# Gadgetron 4.1 and Larmor side by side on one scan: the same v4.1 gadgetron_ismrmrd_client streams the
# same file to each server with the same chain name, alternately, on the same machine, in one run; prints
# the client's wall time and the server's CPU time per run (min and median) and compares the two images
# (bench/image_compare, scaled NRMSE). Both servers run on the CPU, inside a private network namespace
# with loopback only (Gadgetron 4.1 binds every interface).
#   bash scripts/gadgetron-compare.sh [CHAIN.xml] [DATA.h5] [RUNS]
# Defaults: Generic_Cartesian_Grappa.xml, the real R=3 scan in ../shared/data, 7 runs.
# Needs: Gadgetron 4.1 built CPU-only from its source (GT_BUILD, default /work/peers/gt41/build; see
# ../shared/docs/peers.md), the v4.1 client (../shared/tools/gadgetron-client/build.sh) and Larmor's
# build (BUILD_DIR, default build). Neither peer is part of Larmor's build or tests.
set -euo pipefail
cd "$(dirname "$0")/.."
CHAIN=${1:-Generic_Cartesian_Grappa.xml}
DATA=${2:-../shared/data/gadgetron-grappa-r3/meas_MID00349_FID09273_SNR_R3.h5}
RUNS=${3:-7}
GT_BUILD=${GT_BUILD:-/work/peers/gt41/build}
BUILD=${BUILD_DIR:-build}
GT_SRC=$(cd "$GT_BUILD/.." && pwd)
[ -x "$GT_BUILD/apps/gadgetron/gadgetron" ] || { echo "gadgetron-compare: no Gadgetron build at $GT_BUILD" >&2; exit 1; }
CLIENT=$(bash ../shared/tools/gadgetron-client/build.sh /tmp/gtclient)/gadgetron_ismrmrd_client_v41
cmake --build "$BUILD" --target larmor-server image_compare > /dev/null

# Gadgetron's home: the binary, every library it built, the chains of its gadget folders.
HOME_GT=$(mktemp -d /tmp/gt41-home.XXXX)
OUT=$(mktemp -d /tmp/gadgetron-compare.XXXX)
trap 'rm -rf "$HOME_GT"' EXIT
mkdir -p "$HOME_GT/bin" "$HOME_GT/lib" "$HOME_GT/share/gadgetron/config"
cp "$GT_BUILD/apps/gadgetron/gadgetron" "$HOME_GT/bin/"
find "$GT_BUILD" -name "lib*.so*" \( -type f -o -type l \) -exec cp -a {} "$HOME_GT/lib/" \;
find "$GT_SRC/gadgets" -path "*/config/*.xml" -exec cp {} "$HOME_GT/share/gadgetron/config/" \;

cat > "$OUT/inside.sh" <<INSIDE
set -euo pipefail
ip link set lo up
ip addr add 10.254.254.1/32 dev lo
export GADGETRON_HOME=$HOME_GT LD_LIBRARY_PATH=$HOME_GT/lib:\${LD_LIBRARY_PATH:-}
mkdir -p $OUT/gt-work $OUT/lm-deps
$HOME_GT/bin/gadgetron -p 9002 -W $OUT/gt-work/ > $OUT/gadgetron.log 2>&1 &
GT=\$!
$BUILD/server/larmor-server --port 9003 --address 10.254.254.1 --backend cpu --config-dir config \\
  --dependency-dir $OUT/lm-deps > $OUT/larmor.log 2>&1 &
LM=\$!
trap 'kill \$GT \$LM 2>/dev/null || true' EXIT
for _ in \$(seq 100); do grep -q "listening on" $OUT/larmor.log && break; sleep 0.1; done
sleep 2
# utime + stime + cutime + cstime of a process (clock ticks): Gadgetron forks a child per connection.
cpu() { awk '{print \$14 + \$15 + \$16 + \$17}' /proc/\$1/stat; }
tick=\$(getconf CLK_TCK)
for i in \$(seq $RUNS); do
  for s in gadgetron:9002:\$GT larmor:9003:\$LM; do
    name=\${s%%:*}; rest=\${s#*:}; port=\${rest%%:*}; pid=\${rest#*:}
    # Each run prewhitens with the scan's own noise readouts: no noise stored by an earlier run (the v4.1
    # client aborts when Gadgetron 4.1 answers its noise query with a stored one).
    rm -f $OUT/gt-work/* $OUT/lm-deps/*
    c0=\$(cpu \$pid); t0=\$(date +%s.%N)
    $CLIENT -a 10.254.254.1 -p \$port -f $DATA -c $CHAIN -o $OUT/\$name.h5 -G run\$i > $OUT/\$name-client-\$i.log 2>&1
    t1=\$(date +%s.%N); sleep 0.3; c1=\$(cpu \$pid)
    echo "\$name \$(echo "\$t1 - \$t0" | bc -l) \$(echo "(\$c1 - \$c0) / \$tick" | bc -l)" >> $OUT/times.txt
  done
done
INSIDE
unshare -n bash "$OUT/inside.sh"
echo "| server | client wall s (min / median of $RUNS) | server CPU s (min / median) |"
echo "|---|---|---|"
for name in gadgetron larmor; do
  w=$(awk -v n=$name '$1 == n {print $2}' "$OUT/times.txt" | sort -g | awk '{a[NR]=$1} END {printf "%.3f / %.3f", a[1], a[int((NR+1)/2)]}')
  c=$(awk -v n=$name '$1 == n {print $3}' "$OUT/times.txt" | sort -g | awk '{a[NR]=$1} END {printf "%.2f / %.2f", a[1], a[int((NR+1)/2)]}')
  echo "| $name | $w | $c |"
done
"$BUILD/bench/image_compare" "$OUT/larmor.h5" run1 "$OUT/gadgetron.h5" run1
echo "logs and images: $OUT"
