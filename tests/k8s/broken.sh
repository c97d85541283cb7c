#!/usr/bin/env bash
# The validator on a copy of docker/k8s with three faults a reviewer could miss (a misspelt field, a
# probe naming no port, a chain ConfigMap out of step with config/): each must be reported, and the
# run must fail. Exit 77 (skip) when python3-kubernetes is absent.
set -uo pipefail
PY=$1 ROOT=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$ROOT"/docker/k8s/*.yaml "$work/"
sed -i 's/readinessProbe:/readinesProbe:/; s/port: http}/port: htp}/' "$work/larmor.yaml"
sed -i '0,/^    name: /s//    name: x/' "$work/chains.yaml"
out=$("$PY" "$ROOT/scripts/validate-k8s.py" "$work")
rc=$?
[ $rc = 77 ] && { echo "$out"; exit 77; }
echo "$out"
[ $rc = 1 ] || { echo "expected exit 1, got $rc"; exit 1; }
for want in "readinesProbe: no such field in V1Container" "names port 'htp'" "differs from config/"; do
  grep -qF "$want" <<< "$out" || { echo "not reported: $want"; exit 1; }
done
echo "every fault reported"
