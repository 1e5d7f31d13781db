#!/usr/bin/env python3
"""Per-kernel GPU time of one forward window from an `ncu --csv` log (bench/h200_bench.sh kernels).

ncu times each kernel alone (serialised, no launch gaps), so the sum over a decode step's
kernels is the step's pure GPU time; the difference to the measured step time is launch gaps
and host work. Windows are told apart by get_rows (twice per forward: the token embeddings
first, the logit rows last); the last window is summarised.

  python3 bench/ncu_kernels.py NCU.csv [--window K]
"""
import argparse
import collections
import csv
import re


def short(name):
    name = re.sub(r"\(.*", "", name)  # drop the argument list
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"t9::cuda::(\(anonymous namespace\)::)?", "", name)
    return name[:70]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--window", type=int, default=-1, help="which window (default: the last)")
    ap.add_argument("--start", default="get_rows_kernel", help="kernel that opens a window")
    a = ap.parse_args()
    rows = []
    with open(a.csv, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu's own messages are not quoted
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        us = float(r["Metric Value"].replace(",", "")) / 1e3  # base units: ns
        rows.append((int(r["ID"]), r["Kernel Name"], r["Grid Size"], r["Block Size"], us))
    rows.sort()
    # Each forward runs get_rows twice: the token embeddings first, the logit rows' selection
    # last; every other one opens a window.
    opens = [i for i, r in enumerate(rows) if a.start in r[1]][::2]
    windows = [rows[b:e] for b, e in zip(opens, opens[1:] + [len(rows)])]
    print(f"{len(rows)} kernels in {len(windows)} windows: "
          + ", ".join(f"{len(w)} ({sum(r[4] for r in w) / 1e3:.2f} ms)" for w in windows))
    w = windows[a.window]
    total = sum(r[4] for r in w)
    print(f"window {a.window}: {len(w)} kernels, {total / 1e3:.3f} ms of kernel time, "
          f"{total / len(w):.2f} us per kernel")
    by = collections.defaultdict(lambda: [0, 0.0])
    for _, name, grid, block, us in w:
        k = f"{short(name)} grid {grid} block {block}"
        by[k][0] += 1
        by[k][1] += us
    print(f"{'us total':>9} {'%':>5} {'n':>5} {'us each':>8}  kernel")
    for k, (n, us) in sorted(by.items(), key=lambda kv: -kv[1][1])[:40]:
        print(f"{us:9.1f} {100 * us / total:5.1f} {n:5d} {us / n:8.2f}  {k}")


if __name__ == "__main__":
    main()
