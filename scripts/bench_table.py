#!/usr/bin/env python3
"""Prints one Markdown table from Google Benchmark JSON files.

With --ab CURRENT... -- PREVIOUS... it prints the benchmarks of two versions side by side instead
(median over the files of each side: gpu-check.sh ab alternates the two versions' runs).

Each benchmark may publish counters `bytes` (the fewest bytes its work must move through device
memory) and `flops`. For GPU benchmarks (name contains 'GPU' or 'Cuda' or 'cuFFT'), the bound is
max(bytes / copy bandwidth, flops / FP32 rate), with the copy bandwidth measured in the same run by
BM_DeviceCopyBandwidth, and the table shows measured time over that bound.
"""
import json
import sys

FP32_FLOPS = 67e12  # H100/H200 SXM dense FP32 (datasheet); GPU code here is bandwidth-bound


def load(paths):
    rows, context = [], None
    for p in paths:
        try:
            with open(p) as f:
                d = json.load(f)
        except (OSError, ValueError):
            continue  # a benchmark program whose filter matched nothing writes no JSON
        context = context or d.get("context", {})
        for b in d.get("benchmarks", []):
            if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
                continue
            if b.get("error_occurred") or b.get("skipped"):
                rows.append((b.get("run_name", b["name"]), None, b.get("error_message", "error"), b))
                continue
            rows.append((b.get("run_name", b["name"]), b, None, b))
    return rows, context


def to_us(b):
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b.get("time_unit", "ns")]
    return b["real_time"] * scale


def main(paths):
    rows, context = load(paths)
    copy_bw = None
    for name, b, err, _ in rows:
        if b and name.startswith("BM_DeviceCopyBandwidth") and b.get("bytes"):
            copy_bw = b["bytes"] / (to_us(b) * 1e-6)
    print(f"Host: {context.get('host_name', '?')}, {context.get('num_cpus', '?')} CPUs, date {context.get('date', '?')}")
    if copy_bw:
        print(f"Measured device copy bandwidth (read+write): {copy_bw / 1e12:.2f} TB/s\n")
    print("| benchmark | median time (us) | GB/s | bound (us) | time / bound |")
    print("|---|---:|---:|---:|---:|")
    for name, b, err, _ in rows:
        if err:
            print(f"| {name} | skipped: {err} | | | |")
            continue
        t = to_us(b)
        bytes_ = b.get("bytes")
        flops = b.get("flops", 0.0)
        gbps = f"{bytes_ / (t * 1e-6) / 1e9:.0f}" if bytes_ else ""
        bound = ""
        ratio = ""
        is_gpu = any(k in name for k in ("GPU", "Gpu", "Cuda", "CUDA", "cuFFT", "Device"))
        if is_gpu and copy_bw and (bytes_ or flops):
            bound_us = max((bytes_ or 0) / copy_bw, flops / FP32_FLOPS) * 1e6
            bound = f"{bound_us:.1f}"
            ratio = f"{t / bound_us:.2f}x"
        print(f"| {name} | {t:.1f} | {gbps} | {bound} | {ratio} |")
    # Host time per gadget of the chain latency rows (counters host_us_<index>_<gadget>).
    for name, b, err, _ in rows:
        if err or not b:
            continue
        parts = sorted((k, v) for k, v in b.items() if k.startswith("host_us_"))
        if parts:
            split = ", ".join(f"{k[len('host_us_'):].split('_', 1)[1]} {v:.1f}" for k, v in parts)
            print(f"\n{name}: host us per gadget: {split}")
    # Host time to queue each stage (counter host_enqueue_us of cartesian_stages_bench).
    enqueue = [(name, b["host_enqueue_us"]) for name, b, err, _ in rows if b and not err and "host_enqueue_us" in b]
    if enqueue:
        print("\nHost time to queue each stage (us): " + ", ".join(f"{n.split('/')[1]} {v:.1f}" for n, v in enqueue))


def medians(paths):
    """name -> (median time in us, host_us counters) over the median rows of several files."""
    times, counters = {}, {}
    for name, b, err, _ in load(paths)[0]:
        if err or not b:
            continue
        times.setdefault(name, []).append(to_us(b))
        for k, v in b.items():
            if k.startswith("host_us_"):
                counters.setdefault(name, {}).setdefault(k, []).append(v)
    mid = lambda v: sorted(v)[len(v) // 2]
    return ({n: mid(v) for n, v in times.items()},
            {n: {k: mid(v) for k, v in c.items()} for n, c in counters.items()})


def ab(current_paths, previous_paths):
    cur, cur_host = medians(current_paths)
    prev, prev_host = medians(previous_paths)
    print("| benchmark | previous (us) | current (us) | current / previous |")
    print("|---|---:|---:|---:|")
    for name in cur:
        p = prev.get(name)
        print(f"| {name} | {p:.1f} | {cur[name]:.1f} | {cur[name] / p:.2f}x |" if p else f"| {name} | - | {cur[name]:.1f} | |")
    # The server's ingest against the raw socket copy of the same bytes in the same run (issue 23:
    # passthrough >= 95 %, cartesian-rss >= 80 %).
    raw = [n for n in cur if n.startswith("BM_RawSocketCopy")]
    if raw:
        for name in cur:
            if name.startswith("BM_ServerSession"):
                frac = lambda t, n: f"{100 * t[raw[0]] / t[n]:.0f} %" if raw[0] in t and n in t and t[n] else "-"
                print(f"\n{name}: throughput as a fraction of the raw copy, previous {frac(prev, name)}, "
                      f"current {frac(cur, name)}")
    for name in cur_host:
        gadgets = sorted(cur_host[name])
        split = ", ".join(
            f"{k[len('host_us_'):].split('_', 1)[1]} {prev_host.get(name, {}).get(k, float('nan')):.1f} -> "
            f"{cur_host[name][k]:.1f}" for k in gadgets)
        print(f"\n{name}: host us per gadget, previous -> current: {split}")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--ab":
        split = args.index("--") if "--" in args else len(args)
        ab(args[1:split], args[split + 1:])
    else:
        main(args)
