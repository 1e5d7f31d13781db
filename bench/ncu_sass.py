#!/usr/bin/env python3
"""Where a kernel's warps wait, per SASS instruction, from `ncu --page source --print-source sass
--csv` (scripts/device_test_ops.sh ncuop writes one per case).

Prints the kernel's warp-state samples by stall reason (all instructions), then the instructions
holding at least --min-share of the samples with their two largest reasons, in program order
(the executed count tells a loop body from the prologue and epilogue). ncu samples every 2^(5 +
interval) cycles per SM; a kernel of a few microseconds needs the smallest interval
(--warp-sampling-interval 0) to collect more than a few dozen samples.

  python3 bench/ncu_sass.py SASS.csv [--min-share 0.01] [--all]
"""
import argparse
import collections
import csv
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--min-share", type=float, default=0.01,
                    help="show instructions with at least this share of the samples")
    ap.add_argument("--all", action="store_true", help="every executed instruction")
    a = ap.parse_args()
    with open(a.csv, newline="") as f:
        rows = list(csv.reader(f))
    heads = [i for i, r in enumerate(rows) if r and r[0] == "Address"]
    if not heads:
        sys.exit(f"{a.csv}: no SASS table (ncu --page source --print-source sass --csv)")
    names = [r[1] for r in rows if len(r) > 1 and r[0] == "Kernel Name"]
    for k, h0 in enumerate(heads):
        head = rows[h0]
        end = heads[k + 1] if k + 1 < len(heads) else len(rows)
        body = [r for r in rows[h0 + 1:end] if len(r) == len(head)]
        samples = head.index("Warp Stall Sampling (All Samples)")
        executed = head.index("Instructions Executed")
        reasons = [(i, n[len("stall_"):]) for i, n in enumerate(head)
                   if n.startswith("stall_") and "Not Issued" not in n]
        total = sum(int(r[samples] or 0) for r in body)
        print(f"== {names[k] if k < len(names) else 'kernel'}")
        by_reason = collections.Counter()
        for r in body:
            for i, n in reasons:
                by_reason[n] += int(r[i] or 0)
        print(f"{total} samples, {sum(int(r[executed] or 0) for r in body)} warp instructions")
        print("  " + ", ".join(f"{n} {100.0 * c / max(1, total):.0f}%"
                               for n, c in by_reason.most_common(8) if c))
        for r in body:
            s = int(r[samples] or 0)
            if not (a.all and int(r[executed] or 0) > 0) and s < a.min_share * total:
                continue
            top = sorted(((int(r[i] or 0), n) for i, n in reasons), reverse=True)[:2]
            why = ", ".join(f"{n} {c}" for c, n in top if c)
            print(f"{s:6d} {100.0 * s / max(1, total):5.1f}% {r[executed]:>8} "
                  f"{r[1].strip()[:64]:64} {why}")


if __name__ == "__main__":
    main()
