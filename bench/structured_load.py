"""What one constrained request costs the requests batched beside it (structured output on a
server that samples on the device: a constrained row brings its step's logits to the host).
Against one running tempo9 server, three phases of ROWS concurrent greedy chat requests of GEN
tokens each (ignore_eos): all free; ROWS-1 free beside one constrained by a JSON schema whose one
string must be longer than GEN tokens can write (so it runs the whole phase too); all free again.
Prints each phase's wall time and a free row's tok/s (the free rows' tokens over the phase's wall
time, per row), and the ratio of the middle phase to the mean of the other two.

  python3 bench/structured_load.py --url http://127.0.0.1:8190 [--rows 8] [--gen 128]
"""
import argparse
import json
import threading
import time
import urllib.request


def chat(url, i, gen, constrained, out):
    body = {"model": "m", "temperature": 0, "max_tokens": gen, "ignore_eos": True,
            "messages": [{"role": "user", "content": f"Request {i}: describe the sea in detail."}]}
    if constrained:
        schema = {"type": "object", "properties": {"text": {"type": "string", "minLength": 8 * gen}},
                  "required": ["text"]}
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "t", "schema": schema}}
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        resp = json.load(r)
    out[i] = (constrained, resp["usage"]["completion_tokens"], resp["choices"][0]["finish_reason"])


def phase(url, rows, gen, with_constrained):
    out = {}
    threads = [threading.Thread(target=chat, args=(url, i, gen, with_constrained and i == 0, out))
               for i in range(rows)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    free = [n for c, n, _ in out.values() if not c]
    cons = [(n, f) for c, n, f in out.values() if c]
    return wall, sum(free) / len(free) / wall, cons


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--gen", type=int, default=128)
    a = ap.parse_args()
    phase(a.url, a.rows, 8, False)  # warm-up
    rates = []
    for name, constrained in (("free", False), ("one constrained", True), ("free again", False)):
        wall, rate, cons = phase(a.url, a.rows, a.gen, constrained)
        rates.append(rate)
        extra = f", constrained row: {cons[0][0]} tokens, finish {cons[0][1]}" if cons else ""
        print(f"{a.rows} rows, {name}: {wall:.2f} s, {rate:.1f} tok/s per free row{extra}")
    print(f"free rows beside one constrained row / without: {rates[1] / ((rates[0] + rates[2]) / 2):.2f}")
    with urllib.request.urlopen(a.url + "/metrics", timeout=60) as r:  # how the rows were decided
        for line in r.read().decode().splitlines():
            if line.startswith(("tempo9_constraint_masks_total", "tempo9_forced_tokens_total",
                                "tempo9_accepted_forced_tokens_total", "tempo9_generated_tokens_total")):
                print(line)


if __name__ == "__main__":
    main()
