#!/usr/bin/env python3
"""CPU speed of tempo9 vs llama.cpp (llama-cpp-python from .venv-peer) on the same GGUF files.

For each model: prefill of a 512-token prompt (tok/s) and decode of 128 tokens (tok/s), both
programs with the same thread count. The prompt is the same 512 token ids for both: made by
llama.cpp's tokenizer from a fixed text and turned back into text, then checked to re-tokenize to
512 ids. tempo9 is measured through `tempo9 run --raw --temp 0 --ignore-eos`, which prints
prompt and generation speed; llama.cpp through Llama.eval (one 512-token batch, then 128
single-token evals), like llama-bench's pp512 / tg128.

  .venv-peer/bin/python bench/cpu_bench.py --tempo9 build-model/tempo9 --threads 2 \
      [--models DIR] [--reps 3]

llama.cpp's "extra buffer types" (weight repacking, AMX) are off unless --extra-bufts: the AMX
matmul segfaults inside llama_decode on our Sapphire Rapids VMs (see scripts/golden_logits.py).
Repacking speeds llama.cpp up on some types, so ratios measured without it favour tempo9; say
which setting was used when quoting numbers.

Not a test: numbers depend on the machine and its load. Prints one line per model and the
ratios tempo9 / llama.cpp (> 1: tempo9 faster).
"""
import argparse
import os
import re
import subprocess
import sys
import time

MODELS = [
    "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma-3-270m-Q4_K_M.gguf",
    "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
]

SEED_TEXT = (
    "The river runs past the old mill and under the stone bridge, where children fish in summer. "
    "def add(a, b):\n    return a + b\n\nNumbers: 3, 14, 15, 92, 65, 35, 89, 79. "
    "Les enfants jouent dans le jardin pendant que les parents préparent le dîner. "
)


def make_prompt(llm, n_tokens: int) -> tuple[str, list[int]]:
    text = SEED_TEXT
    while len(llm.tokenize(text.encode(), add_bos=False)) < n_tokens + 16:
        text += SEED_TEXT
    ids = llm.tokenize(text.encode(), add_bos=False)[:n_tokens]
    prompt = llm.detokenize(ids).decode("utf-8", errors="ignore")
    ids = llm.tokenize(prompt.encode(), add_bos=False)
    return prompt, ids


def bench_llama_cpp(llm, ids: list[int], n_gen: int) -> tuple[float, float]:
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(ids)
    t1 = time.perf_counter()
    tok = ids[-1]
    for _ in range(n_gen):
        llm.eval([tok])
    t2 = time.perf_counter()
    return len(ids) / (t1 - t0), n_gen / (t2 - t1)


def bench_tempo9(binary: str, model: str, prompt: str, n_gen: int, threads: int):
    cmd = [binary, "run", "-m", model, "--raw", "-p", prompt, "-n", str(n_gen + 1), "--temp", "0",
           "--ignore-eos", "-t", str(threads), "--ctx", "2048"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    m = re.search(r"prompt: (\d+) tokens, ([\d.]+) tok/s \| generated: (\d+) tokens, ([\d.]+) tok/s",
                  out.stderr)
    if not m:
        raise RuntimeError(f"no timings in tempo9 output:\n{out.stderr}")
    return int(m.group(1)), float(m.group(2)), float(m.group(4))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tempo9", default="build/tempo9")
    ap.add_argument("--models", default=os.environ.get(
        "TEMPO9_MODELS", os.path.expanduser("~/.cache/tempo9/models")))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--n-prompt", type=int, default=512)
    ap.add_argument("--n-gen", type=int, default=128)
    ap.add_argument("--only", default="", help="substring filter on model file names")
    ap.add_argument("--extra-bufts", action="store_true")
    args = ap.parse_args()
    import llama_cpp
    import llama_cpp.llama_cpp as llama_c

    if not args.extra_bufts:
        defaults = llama_c.llama_model_default_params

        def without_extra_bufts():
            p = defaults()
            p.use_extra_bufts = False
            return p

        llama_c.llama_model_default_params = without_extra_bufts

    print(f"# {time.strftime('%Y-%m-%d %H:%M')} threads={args.threads} "
          f"llama-cpp-python {llama_cpp.__version__}, extra_bufts={args.extra_bufts}, "
          f"best of {args.reps}")
    for name in MODELS:
        if args.only not in name:
            continue
        path = os.path.join(args.models, name)
        llm = llama_cpp.Llama(model_path=path, n_ctx=2048, n_batch=512, n_ubatch=512,
                              n_threads=args.threads, n_threads_batch=args.threads, verbose=False)
        prompt, ids = make_prompt(llm, args.n_prompt)
        peer = [bench_llama_cpp(llm, ids, args.n_gen) for _ in range(args.reps)]
        del llm
        ours = [bench_tempo9(args.tempo9, path, prompt, args.n_gen, args.threads)
                for _ in range(args.reps)]
        pp_p, tg_p = max(p[0] for p in peer), max(p[1] for p in peer)
        pp_o, tg_o = max(o[1] for o in ours), max(o[2] for o in ours)
        print(f"{name}: prompt {len(ids)} (tempo9 {ours[0][0]}) tokens | "
              f"prefill tempo9 {pp_o:.1f} tok/s, llama.cpp {pp_p:.1f} tok/s, ratio {pp_o / pp_p:.2f} | "
              f"decode tempo9 {tg_o:.1f} tok/s, llama.cpp {tg_p:.1f} tok/s, ratio {tg_o / tg_p:.2f}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
