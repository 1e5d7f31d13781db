"""Structured output side by side: tempo9 and llama-server (the peer, scripts/build_peer.sh
--binaries) on the same GGUF, the same greedy chat requests with and without a JSON schema
(OpenAI response_format; llama-server compiles it with its json-schema-to-grammar). For each
server and mode: decode tok/s (completion tokens over the time after the first token, from
streamed replies), whether every constrained reply parses and matches the schema's keys, and the
cost of the constraint as a ratio to the same server unconstrained. Requests run one at a time,
alternating servers, so both see the same machine.

  python bench/structured_bench.py --model MODEL.gguf [--threads 2] [--rounds 3]
"""
import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 24}, "age": {"type": "integer", "minimum": 0},
    "city": {"type": "string", "maxLength": 24},
    "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 24}, "maxItems": 3}},
    "required": ["name", "age", "city", "hobbies"], "additionalProperties": False}
PROMPTS = ["Invent a person. Reply in JSON with name, age, city and hobbies.",
           "Describe a fictional pilot as JSON: name, age, city, hobbies.",
           "Make up a chess player and give name, age, city and hobbies in JSON."]


def wait_health(url, seconds=120):
    t = time.time() + seconds
    while time.time() < t:
        try:
            urllib.request.urlopen(url + "/health", timeout=2)
            return
        except Exception:
            time.sleep(0.5)
    raise RuntimeError("no /health from " + url)


def stream_chat(url, prompt, schema, max_tokens):
    body = {"model": "m", "messages": [{"role": "user", "content": prompt}], "temperature": 0,
            "max_tokens": max_tokens, "stream": True, "stream_options": {"include_usage": True}}
    if schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}}
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t0 = time.time()
    t_first = None
    text, n_tokens = "", None
    with urllib.request.urlopen(req) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if ev.get("usage"):
                n_tokens = ev["usage"]["completion_tokens"]
            for ch in ev.get("choices", []):
                piece = (ch.get("delta") or {}).get("content") or ""
                if piece and t_first is None:
                    t_first = time.time()
                text += piece
    t1 = time.time()
    return text, n_tokens, (t_first or t1) - t0, t1 - (t_first or t0)


def valid(text):
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return False
    return isinstance(obj, dict) and list(obj) == ["name", "age", "city", "hobbies"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", default="2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=96)
    a = ap.parse_args()
    tempo9 = os.environ.get("TEMPO9_BIN", str(ROOT / "build" / "tempo9"))
    ours = subprocess.Popen([tempo9, "serve", "-m", a.model, "--port", "8131", "-t", a.threads],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run([str(ROOT / "scripts" / "peer_server.sh"), "-m", a.model, "--port", "8132",
                    "--parallel", "1", "--threads", a.threads], check=True, stdout=subprocess.DEVNULL)
    servers = {"tempo9": "http://127.0.0.1:8131", "llama.cpp": "http://127.0.0.1:8132"}
    try:
        for url in servers.values():
            wait_health(url)
        for url in servers.values():  # warm-up: first requests compile and fill caches
            for schema in (None, SCHEMA):
                stream_chat(url, PROMPTS[0], schema, 8)
        stats = {(s, m): [0, 0.0, 0, 0] for s in servers for m in ("free", "schema")}  # tokens, s, valid, n
        for _ in range(a.rounds):
            for prompt in PROMPTS:
                for mode, schema in (("free", None), ("schema", SCHEMA)):
                    for name, url in servers.items():
                        text, n, _, decode_s = stream_chat(url, prompt, schema, a.max_tokens)
                        st = stats[(name, mode)]
                        st[0] += (n or 0) - 1
                        st[1] += decode_s
                        st[2] += valid(text)
                        st[3] += 1
        print(f"model {Path(a.model).name}, {a.threads} threads, {a.rounds} rounds x {len(PROMPTS)} prompts, "
              f"greedy, max_tokens {a.max_tokens}")
        rate = {}
        for (name, mode), (tok, sec, ok, n) in stats.items():
            rate[(name, mode)] = tok / sec if sec > 0 else 0.0
            extra = f", {ok}/{n} valid" if mode == "schema" else ""
            print(f"  {name:9s} {mode:6s}: {rate[(name, mode)]:7.1f} tok/s decode{extra}")
        for name in servers:
            print(f"  {name}: schema / free = {rate[(name, 'schema')] / rate[(name, 'free')]:.2f}")
        print(f"  tempo9 / llama.cpp with the schema: {rate[('tempo9', 'schema')] / rate[('llama.cpp', 'schema')]:.2f}x")
    finally:
        ours.terminate()
        subprocess.run([str(ROOT / "scripts" / "peer_server.sh"), "--stop", "--port", "8132"],
                       stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    sys.exit(main())
