#!/usr/bin/env python3
"""Tokenizer throughput: ours (`tempo9 tokenize --time`) vs Hugging Face `tokenizers`, one thread,
on a ~100k-token mixed text built from tests/data/tokenizer/corpus.json (entries interleaved with
running numbers so the word cache does not see one text repeated verbatim).

Usage: python3 bench/tokenizer_bench.py [--bin build/tempo9] [--runs 5] [--target-tokens 100000]
Prints one line per tokenizer and the ratio. Not a test."""
import argparse
import json
import os
import pathlib
import platform
import subprocess
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from tokenizers import Tokenizer  # noqa: E402  (after the thread settings)

ROOT = pathlib.Path(__file__).resolve().parents[1]
QWEN3 = ROOT.parent / "shared/fixtures/tokenizers/qwen3/tokenizer.json"


def mixed_text(hf, target_tokens):
    corpus = json.loads((ROOT / "tests/data/tokenizer/corpus.json").read_text(encoding="utf-8"))
    parts, n, i = [], 0, 0  # noqa
    while n < target_tokens:
        e = corpus[i % len(corpus)]["text"]
        piece = f"\n{i * 7919 % 100003} {e}"
        parts.append(piece)
        n += len(hf.encode(piece, add_special_tokens=False).ids)
        i += 1
    return parts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "build" / "tempo9"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--target-tokens", type=int, default=100_000)
    a = ap.parse_args()
    hf = Tokenizer.from_file(str(QWEN3))
    parts = mixed_text(hf, a.target_tokens)
    text = "".join(parts)
    t0 = time.perf_counter()  # HF is slow on one huge string: also time it piece by piece
    n_pieces = sum(len(e.ids) for e in hf.encode_batch(parts, add_special_tokens=False))
    pieces_ms = (time.perf_counter() - t0) * 1e3
    times, n_hf = [], 0
    for _ in range(a.runs):
        t0 = time.perf_counter()
        n_hf = len(hf.encode(text, add_special_tokens=False).ids)
        times.append((time.perf_counter() - t0) * 1e3)
    out = subprocess.run([a.bin, "tokenize", "--tokenizer-json", str(QWEN3), "--time", str(a.runs)],
                         input=text.encode(), capture_output=True, check=True).stdout
    ours = json.loads(out)
    assert ours["tokens"] == n_hf, (ours["tokens"], n_hf)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus; "
          f"text: {len(text.encode())} bytes, {n_hf} tokens (Qwen3 vocab)")
    print(f"HF tokenizers : first {times[0]:8.1f} ms  best {min(times):8.1f} ms  "
          f"{n_hf / min(times) * 1e3 / 1e6:6.2f} M tok/s")
    print(f"HF per piece  : {len(parts)} encode_batch inputs {pieces_ms:8.1f} ms  "
          f"{n_pieces / pieces_ms * 1e3 / 1e6:6.2f} M tok/s")
    print(f"tempo9        : first {ours['first_ms']:8.1f} ms  best {ours['best_ms']:8.1f} ms  "
          f"{n_hf / ours['best_ms'] * 1e3 / 1e6:6.2f} M tok/s")
    print(f"speed-up (best): {min(times) / ours['best_ms']:.2f}x")
    # The same text again with the fragment cache on (an agent's re-sent system prompt).
    print(f"tempo9 re-sent: best {ours['cached_ms']:8.3f} ms (fragment cache)")


if __name__ == "__main__":
    main()
