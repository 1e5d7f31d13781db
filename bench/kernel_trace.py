#!/usr/bin/env python3
"""Each kernel's share of a decode step's chain, from a TEMPO9_CUDA_TRACE file.

    TEMPO9_CUDA_TRACE=/tmp/trace.tsv tempo9 run ... --backend cuda
    python3 bench/kernel_trace.py /tmp/trace.tsv [--last N] [--top K]

The trace (src/backend/cuda/cuda_trace.cuh) holds every kernel's device start and end as it ran:
graphs replaying, dependent launches overlapping. With PDL a kernel's blocks start early and
wait for their predecessor, so its start says little; what a kernel costs the step is how much
later the chain ends because of it: its end minus the previous kernel's end ("chain" below).
A window is the work one host synchronization waits for (an engine step) when the trace holds
the host's cudaStreamSynchronize or cudaEventSynchronize calls, else a run of kernels with no gap over --gap-us between
one's end and the next's start; the table covers the last --last windows (default 64), so that
a run's warm-up and prompt steps drop out; --min-us / --max-us pick windows by length first (a
served load's prompt steps, or its decode steps). "idle" is a window's wall time with no kernel
running: where the device waited for the host or for launches.

Rows named "api:..." are the host's CUDA runtime calls (graph launches, synchronizations) in the
same clock. --timeline N prints the last N windows as a timeline instead: each graph launch's
kernels as one device row (first start, last end, the device's idle time before it) among the
host's calls, so a gap shows what the device waited for; --skip K ends them K windows before the
last (a run's last steps are not pipelined: they show the middle steps' overlap only if skipped).
--sequence prints one window's kernels (the last, or --skip K before it) in chain order, each
with its start and end after the previous kernel's end: the table's rows kernel by kernel.
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
    ap.add_argument("--min-us", type=float, default=0.0,
                    help="only windows at least this long (first start to last end): prompt steps")
    ap.add_argument("--max-us", type=float, default=float("inf"),
                    help="only windows at most this long: decode steps of a mixed load")
    ap.add_argument("--timeline", type=int, default=0, metavar="N",
                    help="print the last N windows' device work and host calls instead")
    ap.add_argument("--skip", type=int, default=0, metavar="K",
                    help="with --timeline or --sequence: end K windows before the last")
    ap.add_argument("--sequence", action="store_true",
                    help="print the last window's kernels in chain order instead")
    args = ap.parse_args()

    rows, calls = [], []
    with open(args.trace) as f:
        header = f.readline().rstrip("\n").split("\t")
        if header[:2] != ["start_ns", "end_ns"]:
            print(f"{args.trace}: not a TEMPO9_CUDA_TRACE file", file=sys.stderr)
            return 1
        for line in f:
            p = line.rstrip("\n").split("\t", 6)
            if p[6].startswith("api:"):
                calls.append((int(p[0]), int(p[1]), p[6][4:]))
                continue
            grid = f"({p[3]},{p[4]},{p[5]})"
            rows.append((int(p[0]), int(p[1]), int(p[2]), grid, short(p[6])))
    if not rows:
        print("no kernels in the trace", file=sys.stderr)
        return 1
    rows.sort(key=lambda r: r[1])  # by end: the chain's order

    # A step ends where the host waits for it: the stream (synchronous steps, before stage 34) or
    # the window's event (Stream::wait_for; with pipelined steps the next step is queued by then).
    syncs = sorted(end for _start, end, name in calls
                   if name.startswith(("cudaStreamSynchronize", "cudaEventSynchronize")))
    windows = split_at_syncs(rows, syncs) if syncs else split_at_gaps(rows, args.gap_us * 1000)
    if args.timeline > 0 or args.sequence:
        if not 0 <= args.skip < len(windows):
            print(f"--skip {args.skip}: the trace has {len(windows)} windows", file=sys.stderr)
            return 1
        if args.sequence:
            return sequence(windows[len(windows) - 1 - args.skip])
        return timeline(windows[:len(windows) - args.skip], calls, args.timeline)
    picked = [w for w in windows if args.min_us <= (w[-1][1] - w[0][0]) / 1000 <= args.max_us]
    picked = picked[-args.last:]
    if not picked:
        print(f"no window of {args.min_us:g}-{args.max_us:g} us in the trace", file=sys.stderr)
        return 1

    agg = collections.defaultdict(lambda: [0, 0.0, 0.0])  # count, chain ns, duration ns
    walls, idles = [], []
    for w in picked:
        walls.append(w[-1][1] - w[0][0])
        idles.append(idle_ns(w))
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
          f"{wall_us:.1f} us each (first start to last end), idle {sum(idles) / n / 1000:.1f} "
          f"us each ({'one per host synchronization' if syncs else 'split at gaps'})")
    print(f"{'chain us/step':>13} {'%':>5} {'n/step':>6} {'chain us each':>13} "
          f"{'duration us each':>16}  kernel grid")
    total_chain = sum(a[1] for a in agg.values())
    for (name, grid), (count, chain, dur) in sorted(agg.items(), key=lambda kv: -kv[1][1])[
            :args.top]:
        print(f"{chain / n / 1000:13.1f} {100 * chain / max(1, total_chain):5.1f} "
              f"{count / n:6.1f} {chain / count / 1000:13.2f} {dur / count / 1000:16.2f}  "
              f"{name} {grid}")
    return 0


def split_at_gaps(rows, gap_ns):
    """Runs of kernels (sorted by end) with no gap over gap_ns before the next one's start."""
    windows, cur = [], [rows[0]]
    for r in rows[1:]:
        if r[0] - cur[-1][1] > gap_ns:
            windows.append(cur)
            cur = []
        cur.append(r)
    windows.append(cur)
    return windows


def split_at_syncs(rows, syncs):
    """Each kernel (sorted by end) in the window of the first synchronization that returned
    after it ended; kernels after the last one form a last window."""
    windows, cur, i = [], [], 0
    for r in rows:
        while i < len(syncs) and syncs[i] < r[1]:
            if cur:
                windows.append(cur)
                cur = []
            i += 1
        cur.append(r)
    if cur:
        windows.append(cur)
    return windows


def idle_ns(window):
    """Time between the window's first start and last end when no kernel of it ran."""
    idle, reach = 0, None
    for start, end, *_ in sorted(window):
        if reach is not None and start > reach:
            idle += start - reach
        reach = end if reach is None else max(reach, end)
    return idle


def sequence(window):
    """One window's kernels in chain order (by end), each with its start and end in us after the
    previous kernel's end (a negative start: its blocks began before, waiting for it) and its
    chain share: where the table's averages come from, kernel by kernel."""
    print(f"{'start':>8} {'end':>8} {'duration':>8}  kernel grid (us after the previous end)")
    prev_end = window[0][0]
    for start, end, _graph, grid, name in window:
        print(f"{(start - prev_end) / 1000:+8.2f} {(end - prev_end) / 1000:+8.2f} "
              f"{(end - start) / 1000:8.2f}  {name} {grid}")
        prev_end = max(prev_end, end)
    return 0


def timeline(windows, calls, n):
    """The last n windows: a row per graph launch's kernels (eager kernels: a row per run of
    them) and per host call, by start time, in us from the end of the window before them."""
    picked = [r for w in windows[-n:] for r in w]
    t0 = windows[-n - 1][-1][1] if len(windows) > n else picked[0][0]
    events = []  # (start, end, text)
    runs = []    # [start, end, graph, count]
    for start, end, graph, _grid, _name in sorted(picked):
        if runs and graph != 0 and runs[-1][2] == graph:
            runs[-1][1] = max(runs[-1][1], end)
            runs[-1][3] += 1
        elif runs and graph == 0 and runs[-1][2] == 0 and start <= runs[-1][1] + 1000:
            runs[-1][1] = max(runs[-1][1], end)
            runs[-1][3] += 1
        else:
            runs.append([start, end, graph, 1])
    prev_end = t0
    for start, end, graph, count in runs:
        what = f"graph {graph}" if graph != 0 else "eager"
        events.append((start, end, f"device {what}: {count} kernels, idle {(start - prev_end) / 1000:.1f} us before"))
        prev_end = max(prev_end, end)
    last = picked[-1][1] if picked else t0
    for start, end, name in calls:
        if t0 <= start <= last:
            events.append((start, end, f"host {name}"))
    print(f"{'start us':>9} {'end us':>9}  what")
    for start, end, text in sorted(events):
        print(f"{(start - t0) / 1000:9.1f} {(end - t0) / 1000:9.1f}  {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
