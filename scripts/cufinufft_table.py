#!/usr/bin/env python3
"""Table of cuFINUFFT's cuperftest runs written by scripts/gpu-check.sh (section 4b): for each case,
type and tolerance, the execute and set-points times (mean ms per call over n_runs) of methods 1 and 2
and the better of the two, which is what Larmor's NUFFT is compared with in bench/RESULTS.md."""
import re
import sys


def main(path):
    runs = {}
    key = None
    for line in open(path):
        m = re.match(r"== (\S+) type (\d) tol (\S+) method (\d)", line)
        if m:
            key = m.groups()
            continue
        if key and line.startswith(("execute,", "setpts,")):
            f = line.strip().split(",")
            runs.setdefault(key[:3], {}).setdefault(key[3], {})[f[0]] = float(f[3])
    print("| case | type | tol | execute m1 (ms) | execute m2 (ms) | best (ms) | set points (ms) |")
    print("|---|---|---|---:|---:|---:|---:|")
    for (case, typ, tol), by_method in runs.items():
        ex = {m: v.get("execute") for m, v in by_method.items()}
        best = min(v for v in ex.values() if v is not None) if any(v is not None for v in ex.values()) else None
        sp = min((v.get("setpts") for v in by_method.values() if v.get("setpts") is not None), default=None)
        fmt = lambda v: "-" if v is None else f"{v:.3f}"
        print(f"| {case} | {typ} | {tol} | {fmt(ex.get('1'))} | {fmt(ex.get('2'))} | {fmt(best)} | {fmt(sp)} |")


if __name__ == "__main__":
    main(sys.argv[1])
