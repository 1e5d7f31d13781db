#!/usr/bin/env python3
"""Plots a `tempo9 bench --json` report: TTFT by turn (p50 bars, p90 whiskers) and generated
tokens/s over time, one colour per target (A = --url, B = --compare).

    python bench/plot_bench.py report.json out.png

`tempo9 bench --plot out.png` runs this itself (with the checkout's .venv python).
Throughput over time spreads each request's completion_tokens evenly over its text chunks (a
server may pack several tokens into one chunk) and counts them in fixed time buckets; time is
measured on each target's own clock (its phases laid end to end) so A and B overlay.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = ["tab:blue", "tab:orange"]


def percentile(values, q):
    """Linear interpolation between closest ranks (the same rule as bench_report.cpp)."""
    v = sorted(values)
    if not v:
        return 0.0
    pos = q * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def ttft_by_turn(target, n_turns):
    p50, p90 = [], []
    for t in range(1, n_turns + 1):
        xs = [r["ttft_ms"] for r in target["requests"] if r["turn"] == t and r["error"] is None and r["ttft_ms"] >= 0]
        p50.append(percentile(xs, 0.5))
        p90.append(percentile(xs, 0.9))
    return p50, p90


def throughput_series(target):
    """(bucket start seconds, generated tokens/s) over the target's own phases laid end to end
    (in --compare runs the other target's phases in between are cut out)."""
    offset, t = {}, 0.0
    for ph in target["phases"]:
        offset[ph["round"]] = (ph["start_ms"], t)
        t += (ph["end_ms"] - ph["start_ms"]) / 1000.0
    events = []  # (seconds on the target's clock, tokens)
    for r in target["requests"]:
        chunks = r["chunk_ms"]
        if r["error"] is not None or not chunks or r["completion_tokens"] <= 0 or r["round"] not in offset:
            continue
        start_ms, base_s = offset[r["round"]]
        w = r["completion_tokens"] / len(chunks)
        events += [(base_s + (r["start_ms"] + c - start_ms) / 1000.0, w) for c in chunks]
    if not events:
        return [], []
    end = max(e[0] for e in events)
    width = max(0.5, end / 60.0)
    n = int(end / width) + 1
    buckets = [0.0] * n
    for t, w in events:
        buckets[min(int(t / width), n - 1)] += w
    return [i * width for i in range(n)], [b / width for b in buckets]


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        report = json.load(f)
    wl = report["workload"]
    n_turns = wl["turns"]
    targets = report["targets"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.8 / max(1, len(targets))
    for i, t in enumerate(targets):
        p50, p90 = ttft_by_turn(t, n_turns)
        xs = [turn + (i - (len(targets) - 1) / 2) * width for turn in range(1, n_turns + 1)]
        err = [[0] * n_turns, [max(0.0, b - a) for a, b in zip(p50, p90)]]
        ax1.bar(xs, p50, width, yerr=err, capsize=3, color=COLOURS[i % 2], label=f"{t['label']}: {t['url']}")
        times, tps = throughput_series(t)
        ax2.step(times, tps, where="post", color=COLOURS[i % 2], label=f"{t['label']} ({t['generated_tok_s']:.1f} tok/s avg)")
    ax1.set_xticks(range(1, n_turns + 1))
    ax1.set_xlabel("turn (history re-sent)")
    ax1.set_ylabel("TTFT ms (bar p50, whisker p90)")
    ax1.set_title("Time to first token by turn")
    ax1.legend(fontsize=8)
    ax2.set_xlabel("seconds of the target's own phases")
    ax2.set_ylabel("generated tokens/s")
    ax2.set_title("Generation throughput over time")
    ax2.legend(fontsize=8)
    fig.suptitle(f"tempo9 bench {wl['name']}: {wl['agents']} agents x {wl['turns']} turns, system~{wl['system_tokens']}, "
                 f"turn~{wl['turn_tokens']}, gen {wl['gen_tokens']}, rounds {wl['rounds']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(argv[2], dpi=80)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
