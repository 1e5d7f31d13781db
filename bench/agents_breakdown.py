#!/usr/bin/env python3
"""Where an agent round's time went: a `tempo9 bench agents --json` report beside the server's
`/metrics` scraped right after it (bench/h200_bench.sh agents saves both).

    python3 bench/agents_breakdown.py agents_tempo9.json agents_metrics_tempo9.txt

Prints the engine's busy time against the bench's wall (busy ~ wall: the device never waited on
the host or the clients), the step-time histogram split into decode-sized and prefill-sized
steps, and per turn the prompt tokens the requests computed (prompt - cached) and how many of
them were the previous reply again (its span [prompt_prev, prompt_prev + completion_prev) of the
new prompt, overlapped with the computed span [cached, prompt)).
"""
import json
import re
import sys
from collections import defaultdict


def metrics(path):
    """Prometheus text -> {name{labels}: value} for the samples (comments skipped)."""
    out = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            key, _, value = line.rpartition(" ")
            try:
                out[key] = float(value)
            except ValueError:
                pass
    return out


def step_buckets(m):
    """[(le seconds, cumulative count)] of tempo9_engine_step_seconds, ascending."""
    rows = []
    for key, v in m.items():
        hit = re.fullmatch(r'tempo9_engine_step_seconds_bucket\{le="([^"]+)"\}', key)
        if hit and hit.group(1) != "+Inf":
            rows.append((float(hit.group(1)), int(v)))
    return sorted(rows)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    report = json.load(open(sys.argv[1]))
    m = metrics(sys.argv[2])
    target = report["targets"][0]
    wall = target["wall_s"]
    busy = m.get('tempo9_engine_time_seconds_total{part="step"}', float("nan"))
    steps = int(m.get("tempo9_engine_steps_total", 0))
    print(f"wall {wall:.2f} s, engine steps {steps}, busy {busy:.2f} s ({busy / wall:.0%} of wall)")

    # The step histogram, bucket by bucket (an 8-row decode step of the 35B is ~7 ms; a 2k-token
    # prefill step ~200 ms).
    buckets = step_buckets(m)
    prev = 0
    for le, cum in buckets:
        if cum > prev:
            print(f"  steps <= {le * 1000:7.1f} ms: {cum - prev}")
        prev = cum

    computed = int(m.get("tempo9_computed_tokens_total", 0))
    print(f"computed tokens {computed} (prompt {int(m.get('tempo9_prompt_tokens_total', 0))}, "
          f"cached {int(m.get('tempo9_cached_prompt_tokens_total', 0))})")

    by_agent = defaultdict(list)
    for r in target["requests"]:
        by_agent[r["agent"]].append(r)
    per_turn = defaultdict(lambda: [0, 0, 0])  # computed, re-sent reply, requests
    for reqs in by_agent.values():
        reqs.sort(key=lambda r: r["turn"])
        prev_req = None
        for r in reqs:
            row = per_turn[r["turn"]]
            row[0] += r["prompt_tokens"] - r["cached_tokens"]
            if prev_req is not None:
                # The previous reply sits at about [prev prompt, prev prompt + completion) of this
                # prompt; the computed tokens are [cached, prompt): their overlap.
                lo = max(prev_req["prompt_tokens"], r["cached_tokens"])
                hi = min(prev_req["prompt_tokens"] + prev_req["completion_tokens"],
                         r["prompt_tokens"])
                row[1] += max(0, hi - lo)
            row[2] += 1
            prev_req = r
    for turn in sorted(per_turn):
        c, resent, n = per_turn[turn]
        print(f"turn {turn}: {n} requests, {c} prompt tokens computed ({c / n:.0f} each), "
              f"of which the previous reply again: {resent} ({resent / max(c, 1):.0%})")


if __name__ == "__main__":
    main()
