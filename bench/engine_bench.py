#!/usr/bin/env python3
"""Engine benchmarks (issue 5) with a real model. Not a test: it prints numbers.

  python3 bench/engine_bench.py --build-dir build-engint [--model PATH] [--threads N]
                                [--only memory,throughput,ttft,overhead] [--json OUT]

Sections:
  memory      `tempo9 serve --ctx 4096` vs `--ctx 131072` (same --kv-memory cap): VmRSS of the
              server process once /health is up, and after one short request. KV is taken on
              demand, so the difference should be ~0 (the test MemoryOnDemand asserts <= 4 MiB).
  throughput  1, 4 and 8 concurrent /v1/completions requests over HTTP (distinct 64-token
              prompts, 64 greedy tokens each; end-of-generation tokens banned via logit_bias so
              every request generates exactly that many): generated tok/s over the wall time.
  ttft        time to first token (a max_tokens=1 request) of a 2048-token prefix + 16-token
              suffix, cold vs with the prefix cached by an earlier request with another suffix.
              Goal: warm <= 0.2 x cold.
  overhead    `test_integration --engine-bench`: in-process, EngineStats step-time counters;
              scheduler overhead = (schedule + postprocess) / step time. Goal < 2%.
"""
import argparse
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"


def models_dir():
    return os.environ.get("TEMPO9_MODELS", os.path.expanduser("~/.cache/tempo9/models"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url, body=None, timeout=600):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read().decode())


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


class Server:
    """A `tempo9 serve` child process on a free port."""

    def __init__(self, binary, model, extra):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [binary, "serve", "-m", model, "--port", str(self.port)] + extra
        self.cmd = " ".join(cmd)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.cmd} exited: {self.proc.stderr.read().decode()}")
            try:
                urllib.request.urlopen(self.url + "/health", timeout=2).read()
                return
            except Exception:
                time.sleep(0.2)
        raise RuntimeError(f"{self.cmd}: not ready after 120 s")

    def complete(self, prompt, max_tokens, logit_bias=None):
        body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
        if logit_bias:
            body["logit_bias"] = logit_bias
        return http_json(self.url + "/v1/completions", body)

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def synthetic_prompt(n, seed, lo=1000, hi=49000):
    rng = random.Random(seed)
    return [rng.randrange(lo, hi) for _ in range(n)]


def eog_bias():
    # SmolLM2's end-of-generation tokens: <|endoftext|> (0), <|im_start|> (1), <|im_end|> (2).
    return {"0": -100, "1": -100, "2": -100}


def bench_memory(args, model):
    out = []
    for ctx in (4096, 131072):
        srv = Server(args.tempo9, model, ["--ctx", str(ctx), "--kv-memory", "4G", "-t",
                                          str(args.threads)])
        try:
            rss_ready = vm_rss_kib(srv.proc.pid)
            r = srv.complete(synthetic_prompt(8, 1), 8, eog_bias())
            rss_req = vm_rss_kib(srv.proc.pid)
            rec = {"ctx": ctx, "cmd": srv.cmd, "rss_ready_kib": rss_ready,
                   "rss_after_request_kib": rss_req,
                   "generated": r["usage"]["completion_tokens"]}
        finally:
            srv.close()
        print(f"memory ctx={ctx}: VmRSS ready {rss_ready} KiB, after 1 request {rss_req} KiB",
              flush=True)
        out.append(rec)
    out.append({"diff_ready_kib": out[1]["rss_ready_kib"] - out[0]["rss_ready_kib"],
                "diff_after_request_kib":
                    out[1]["rss_after_request_kib"] - out[0]["rss_after_request_kib"]})
    print(f"memory diff (131072 - 4096): ready {out[2]['diff_ready_kib']} KiB, "
          f"after request {out[2]['diff_after_request_kib']} KiB", flush=True)
    return out


def bench_throughput(srv, n_prompt=64, n_gen=64):
    srv.complete(synthetic_prompt(8, 7), 4, eog_bias())  # warm-up (page in the weights)
    out = []
    for conc in (1, 4, 8):
        results = [None] * conc

        def worker(i):
            results[i] = srv.complete(synthetic_prompt(n_prompt, 1000 * conc + i), n_gen,
                                      eog_bias())

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(conc)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        gen = sum(r["usage"]["completion_tokens"] for r in results)
        total = gen + conc * n_prompt
        rec = {"concurrency": conc, "prompt_tokens": n_prompt, "gen_tokens": n_gen,
               "generated": gen, "wall_s": round(wall, 3), "gen_tok_s": round(gen / wall, 2),
               "all_tok_s": round(total / wall, 2)}
        print(f"throughput concurrency={conc}: {gen} generated in {wall:.2f} s = "
              f"{gen / wall:.1f} tok/s ({total / wall:.1f} tok/s counting the prompts)",
              flush=True)
        out.append(rec)
    return out


def bench_ttft(srv, n_prefix=2048, n_suffix=16):
    prefix = synthetic_prompt(n_prefix, 424242)

    def one(suffix_seed):
        prompt = prefix + synthetic_prompt(n_suffix, suffix_seed)
        t0 = time.perf_counter()
        r = srv.complete(prompt, 1, eog_bias())
        return time.perf_counter() - t0, r["usage"]["prompt_tokens_details"]["cached_tokens"]

    cold_s, cold_cached = one(1)
    warm_s, warm_cached = one(2)
    warm2_s, warm2_cached = one(3)
    rec = {"prefix_tokens": n_prefix, "suffix_tokens": n_suffix,
           "cold_s": round(cold_s, 3), "cold_cached": cold_cached,
           "warm_s": round(warm_s, 3), "warm_cached": warm_cached,
           "warm2_s": round(warm2_s, 3), "warm2_cached": warm2_cached,
           "warm_over_cold": round(min(warm_s, warm2_s) / cold_s, 4)}
    print(f"ttft {n_prefix}+{n_suffix} tokens: cold {cold_s * 1000:.0f} ms ({cold_cached} cached), "
          f"warm {warm_s * 1000:.0f} ms / {warm2_s * 1000:.0f} ms ({warm_cached} cached) "
          f"-> warm/cold {rec['warm_over_cold']:.3f}", flush=True)
    return rec


def bench_overhead(args):
    exe = os.path.join(args.build_dir, "tests", "test_integration")
    env = dict(os.environ)
    p = subprocess.run([exe, "--engine-bench", "64"], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{exe} --engine-bench failed: {p.stderr}")
    out = []
    for line in p.stdout.splitlines():
        parts = line.split()
        if parts and parts[0] == "prefill_profile":
            rec = dict(kv.split("=", 1) for kv in parts[1:])
            rec["record"] = "prefill_profile"
            out.append(rec)
            print(f"in-process prefill of {rec['prompt_tokens']} tokens in chunks of {rec['chunk']}: "
                  f"{rec['prefill_tok_s']} tok/s; model ms per chunk {rec['step_model_ms']}",
                  flush=True)
        if parts and parts[0] == "engine_bench":
            rec = dict(kv.split("=", 1) for kv in parts[1:])
            out.append(rec)
            print(f"in-process concurrency={rec['concurrency']}: {rec['gen_tok_s']} tok/s, "
                  f"{rec['steps']} steps, schedule {rec['schedule_ms_total']} ms + postprocess "
                  f"{rec['postprocess_ms_total']} ms of {rec['step_ms_total']} ms step time "
                  f"= {rec['sched_overhead_pct']}% overhead", flush=True)
    return out


def machine():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "cpu": cpu, "n_cpus": os.cpu_count(),
            "loadavg": open("/proc/loadavg").read().split()[:3]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--tempo9", help="tempo9 binary (default: BUILD_DIR/tempo9)")
    ap.add_argument("--model", default=os.path.join(models_dir(), MODEL))
    ap.add_argument("--threads", type=int, default=0, help="server compute threads (0: all)")
    ap.add_argument("--only", default="memory,throughput,ttft,overhead")
    ap.add_argument("--json", help="write all results here")
    args = ap.parse_args()
    args.tempo9 = args.tempo9 or os.path.join(args.build_dir, "tempo9")
    only = set(args.only.split(","))
    res = {"machine_start": machine(), "command": " ".join([sys.executable] + sys.argv)}
    print(f"# {res['machine_start']}", flush=True)
    if "memory" in only:
        res["memory"] = bench_memory(args, args.model)
    if only & {"throughput", "ttft"}:
        srv = Server(args.tempo9, args.model, ["--ctx", "8192", "-t", str(args.threads)])
        res["server_cmd"] = srv.cmd
        try:
            if "throughput" in only:
                res["throughput"] = bench_throughput(srv)
            if "ttft" in only:
                res["ttft"] = bench_ttft(srv)
        finally:
            srv.close()
    if "overhead" in only:
        res["overhead"] = bench_overhead(args)
    res["machine_end"] = machine()
    print(f"# end {res['machine_end']}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
