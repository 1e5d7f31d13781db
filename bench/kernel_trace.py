#!/usr/bin/env python3
"""Each kernel's share of a decode step's chain, from a TEMPO9_CUDA_TRACE file.

    TEMPO9_CUDA_TRACE=/tmp/trace.tsv tempo9 run ... --backend cuda
    python3 bench/kernel_trace.py /tmp/trace.tsv [--last N] [--top K]

The trace (src/backend/cuda/cuda_trace.cuh) holds every kernel's device start and end as it ran:
graphs replaying, dependent launches overlapping. With PDL a kernel's blocks start early and
wait for their predecessor, so its start says little; what a kernel costs the step is how much
later the chain ends because of it: its end minus the previous kernel's end ("chain" below).
Windows are runs of kernels with no gap over --gap-us between one's end and the next's start
(a decode step is one window); the table covers the last --last windows (default 64), so that a
run's warm-up and prompt steps drop out.
"""
import argparse
import collections
import re
import sys


def short(name: str) -> str:
    """The kernel's name without its namespaces and argument list, with its template arguments."""
    name = re.sub(r"^void ", "", name)  # the return type of a demangled __global__
    name = re.sub(r"\(anonymous namespace\)::", "", name)
    name = re.sub(r"\bt9::cuda::", "", name)
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):  # the argument list: the first '(' outside template brackets
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    return name[:cut]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--last", type=int, default=64, help="windows (steps) to summarize")
    ap.add_argument("--gap-us", type=float, default=50.0, help="gap that ends a window")
    ap.add_argument("--top", type=int, default=30, help="rows of the table")
    args = ap.parse_args()

    rows = []
    with open(args.trace) as f:
        header = f.readline().rstrip("\n").split("\t")
        if header[:2] != ["start_ns", "end_ns"]:
            print(f"{args.trace}: not a TEMPO9_CUDA_TRACE file", file=sys.stderr)
            return 1
        for line in f:
            p = line.rstrip("\n").split("\t", 6)
            grid = f"({p[3]},{p[4]},{p[5]})"
            rows.append((int(p[0]), int(p[1]), int(p[2]), grid, short(p[6])))
    if not rows:
        print("no kernels in the trace", file=sys.stderr)
        return 1
    rows.sort(key=lambda r: r[1])  # by end: the chain's order

    windows, cur = [], [rows[0]]
    for r in rows[1:]:
        if r[0] - cur[-1][1] > args.gap_us * 1000:
            windows.append(cur)
            cur = []
        cur.append(r)
    windows.append(cur)
    picked = windows[-args.last:]

    agg = collections.defaultdict(lambda: [0, 0.0, 0.0])  # count, chain ns, duration ns
    walls = []
    for w in picked:
        walls.append(w[-1][1] - w[0][0])
        prev_end = w[0][0]
        for start, end, _graph, grid, name in w:
            a = agg[(name, grid)]
            a[0] += 1
            a[1] += max(0, end - prev_end)
            a[2] += end - start
            prev_end = max(prev_end, end)

    n = len(picked)
    wall_us = sum(walls) / n / 1000
    kernels = sum(len(w) for w in picked) / n
    print(f"{len(windows)} windows in the trace; the last {n}: {kernels:.0f} kernels and "
          f"{wall_us:.1f} us each (first start to last end)")
    print(f"{'chain us/step':>13} {'%':>5} {'n/step':>6} {'chain us each':>13} "
          f"{'duration us each':>16}  kernel grid")
    total_chain = sum(a[1] for a in agg.values())
    for (name, grid), (count, chain, dur) in sorted(agg.items(), key=lambda kv: -kv[1][1])[
            :args.top]:
        print(f"{chain / n / 1000:13.1f} {100 * chain / max(1, total_chain):5.1f} "
              f"{count / n:6.1f} {chain / count / 1000:13.2f} {dur / count / 1000:16.2f}  "
              f"{name} {grid}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
