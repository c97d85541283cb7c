#!/usr/bin/env bash
# Runs cuFINUFFT's cuperftest (.carry/peers, scripts/build-cufinufft.sh) on the GPU machine at the
# sizes of Larmor's NUFFT benchmarks: each case of stdin ("name N1 N2 N3 M ntransf"), types 1 and 2,
# the tolerances TOLS (default "1e-3 1e-5"), methods 1 and 2 (GM-sort, SM), appended to file $1 in the
# form scripts/cufinufft_table.py reads. A peer to measure, never a dependency.
# Usage: run-cufinufft.sh <out file> <<'CASES' ... CASES
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CUPERF=${CUPERF:-$ROOT/.carry/peers/cuperftest}
OUTFILE=${1:?output file}
[ -x "$CUPERF" ] || { echo "no cuperftest at $CUPERF" >&2; exit 1; }
while read -r name n1 n2 n3 m nt; do
  [ -n "$name" ] || continue
  for type in 1 2; do for tol in ${TOLS:-1e-3 1e-5}; do for method in 1 2; do
    echo "== $name type $type tol $tol method $method" >> "$OUTFILE"
    timeout "${CUPERF_TIMEOUT:-120}" "$CUPERF" --prec f --type $type --N1 $n1 --N2 $n2 --N3 $n3 --M $m --ntransf $nt \
      --tol $tol --method $method --n_runs 10 >> "$OUTFILE" 2>&1 || echo "(exit $?)" >> "$OUTFILE"
  done; done; done
done
