#!/usr/bin/env python3
"""Golden logits from llama.cpp (llama-cpp-python, the "peer") for tests/model/golden_test.cpp.

Teacher-forced: a fixed, varied text (prose, code, numbers, JSON, French and German) is tokenized
with llama.cpp's own tokenizer, cut to --n-tokens ids, and evaluated in one pass with
logits_all=True. For every position the top-16 token ids and their logits are stored (not the
whole vocabulary, to keep each golden file well under 1 MB), together with the token ids, so our
test feeds exactly the same ids.

Run with the peer venv (scripts/build_peer.sh):
  .venv-peer/bin/python scripts/golden_logits.py ~/.cache/tempo9/models/<model>.gguf \
      tests/data/model/<model>.golden.json
Settings: F16 KV cache (llama.cpp's default), n_ctx 1024, one batch of up to 1024 tokens, and by
default llama.cpp's "extra buffer types" (weight repacking, AMX) off: on our Sapphire Rapids VMs
the AMX matmul segfaults inside llama_decode, and repacking only changes llama.cpp's memory layout
and summation order, not what it computes (--extra-bufts turns them back on).
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np

TOP_K = 16

# Varied on purpose: different token statistics exercise different rows of the weights.
TEXT = """The history of the printing press begins in the fifteenth century, when Johannes
Gutenberg combined a screw press with movable metal type. Within fifty years, presses were
running in more than two hundred European cities, and the price of books fell sharply. Scholars
argue about the size of the effect, but few doubt that cheap printing changed how ideas spread.

def fibonacci(n: int) -> list[int]:
    \"\"\"Return the first n Fibonacci numbers.\"\"\"
    seq = [0, 1]
    while len(seq) < n:
        seq.append(seq[-1] + seq[-2])
    return seq[:n]

for i, value in enumerate(fibonacci(12)):
    print(f"{i:2d}: {value}")

{"id": 4721, "name": "sensor-7", "readings": [12.5, 13.25, 11.0, 9.875], "active": true,
 "tags": ["north", "roof"], "updated": "2024-03-18T07:45:00Z"}

Le petit village se trouvait au bord de la rivière. Chaque matin, les pêcheurs partaient avant
l'aube et revenaient avec des paniers pleins. Die Stadt liegt an einem breiten Fluss, und im
Sommer sitzen die Leute bis spät in der Nacht draußen vor den Cafés.

Prime numbers below one hundred: 2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53,
59, 61, 67, 71, 73, 79, 83, 89, 97. Their sum is 1060, and there are exactly twenty-five of them.

Q: A train leaves the station at 3:15 pm and travels at 80 km/h. How far has it gone by 5:45 pm?
A: Two and a half hours at 80 km/h is 200 kilometres.

SELECT customer_id, COUNT(*) AS orders, SUM(total) AS revenue
FROM orders
WHERE created_at >= DATE '2023-01-01'
GROUP BY customer_id
HAVING COUNT(*) > 3
ORDER BY revenue DESC
LIMIT 10;

In the quiet hours after midnight, the observatory's dome turned slowly as the telescope tracked
a faint galaxy across the sky. The astronomer checked the exposure, adjusted the focus by a few
microns, and waited. Photons that had left their source before the Earth had oceans were now
arriving, one by one, at a cooled silicon chip.

#include <stdio.h>
int main(void) {
    int counts[26] = {0};
    int c;
    while ((c = getchar()) != EOF) {
        if (c >= 'a' && c <= 'z') counts[c - 'a']++;
    }
    for (int i = 0; i < 26; i++) printf("%c %d\\n", 'a' + i, counts[i]);
    return 0;
}

A recipe for bread: mix 500 g of flour, 350 ml of warm water, 10 g of salt and 7 g of dried
yeast. Knead for ten minutes, let the dough rise for an hour, shape it, and bake at 230 degrees
for thirty-five minutes, until the crust is deep brown and the loaf sounds hollow when tapped.
The committee met on Tuesday to review the budget for the coming year. After a long debate about
road repairs, the library's opening hours and a new playground near the school, the members
agreed to raise spending by 3.2 percent, with most of the increase going to maintenance. One
member voted against, arguing that the town should first repay the loan it took out in 2019.

| year | population | households |
|------|-----------:|-----------:|
| 2000 |     12,480 |      4,910 |
| 2010 |     13,905 |      5,602 |
| 2020 |     15,377 |      6,418 |

fn parse_pair(s: &str) -> Option<(i32, i32)> {
    let (a, b) = s.split_once(',')?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

Every autumn the geese fly south in long, uneven lines, calling to one another as they go. Nobody
in the valley knows exactly where they spend the winter, but they come back each spring, a little
thinner, to the same marsh behind the old mill.
"""



def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def add_bos_of(llm) -> bool:
    """tokenizer.ggml.add_bos_token as llama.cpp reads it (absent: llama.cpp's default, True)."""
    v = llm.metadata.get("tokenizer.ggml.add_bos_token")
    return True if v is None else v == "true"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--n-tokens", type=int, default=600)
    ap.add_argument("--threads", type=int, default=2)
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

    llm = llama_cpp.Llama(model_path=args.model, n_ctx=1024, n_batch=1024, n_ubatch=1024,
                          logits_all=True, n_threads=args.threads, verbose=False)
    # add_bos as the file says (llama.cpp's rule); special=False: the text is plain text.
    ids = llm.tokenize(TEXT.encode("utf-8"), add_bos=add_bos_of(llm), special=False)
    if len(ids) < args.n_tokens:
        print(f"text has only {len(ids)} tokens, need {args.n_tokens}", file=sys.stderr)
        return 1
    ids = ids[: args.n_tokens]
    llm.reset()
    llm.eval(ids)
    scores = np.asarray(llm.scores[: len(ids)], dtype=np.float32)  # [n_tokens, n_vocab]
    top = np.argsort(-scores, axis=1, kind="stable")[:, :TOP_K]
    golden = {
        "model": os.path.basename(args.model),
        "model_sha256": sha256_of(args.model),
        "made_by": "scripts/golden_logits.py",
        "peer": f"llama-cpp-python {llama_cpp.__version__}",
        "kv_type": "F16",
        "extra_bufts": bool(args.extra_bufts),
        "top_k": TOP_K,
        "tokens": [int(t) for t in ids],
        "top_ids": top.astype(int).tolist(),
        "top_logits": [[round(float(scores[i, j]), 5) for j in row] for i, row in enumerate(top)],
    }
    with open(args.out, "w") as f:
        json.dump(golden, f, separators=(",", ":"))
    print(f"{args.out}: {len(ids)} positions, n_vocab {scores.shape[1]}, "
          f"{os.path.getsize(args.out)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
