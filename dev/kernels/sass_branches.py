#!/usr/bin/env python3
"""Divergence regions inside the loops of every CUDA kernel, from its SASS. No GPU needed.

A `cond ? 0 : expf(x)` or an `if (j < 4) ... else ...` in an unrolled loop body can compile to a
BSSY/BSYNC region per element: the scheduler cannot move instructions across it, so the loop's
independent work (32 exponentials, the next row's loads) runs one piece after another. Stage 22
(docs/CUDA.md) found two such loops this way (the flash attention's softmax: 8B decode attention
16.2 -> 11.7 us; the Q4_K scale decode between a GEMV's loads). This lists, per kernel, its code
size, its BSSY regions and those inside a loop of at most --loop-max instructions (the hot inner
loops), with their MUFU (exp, rcp, sqrt) count. A high "in loops" count is worth a look at the
SASS (nvdisasm -c) before any other tuning; it is a lead, not a verdict: a short loop that runs
once per block (a prologue's table walk, a rolled staging loop with integer divisions) counts
too, and a uniform branch (every lane the same way) costs only its scheduling barrier.

Needs nvdisasm, from the PyPI wheel: pip download --no-deps nvidia-cuda-nvdisasm -d /tmp/nvd &&
unzip -o /tmp/nvd/*.whl -d /tmp/nvd/x (the default --nvdisasm path).

  python3 dev/kernels/sass_branches.py [--loop-max 800] [--top 12] [FILE.cu ...]
      (default: every src/backend/cuda/*.cu; run from the repository root; ~1 min per large file)
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptxas_registers import CUBIN_FLAGS, demangle, short  # noqa: E402

INSN = re.compile(r"/\*([0-9a-f]{4,6})\*/\s+(.*?);")
LABEL = re.compile(r"\n(\.L_x_\d+):\n\s+/\*([0-9a-f]{4,6})\*/")
BACK = re.compile(r"BRA[^`]*`\((\.L_x_\d+)\)")


def kernels(sass):
    """(mangled name, [(address, text)], {label: address}) per kernel."""
    for part in re.split(r"\n\.text\.", sass)[1:]:
        name = part.split(":", 1)[0]
        insns = [(int(a, 16), t) for a, t in INSN.findall(part)]
        labels = {m.group(1): int(m.group(2), 16) for m in LABEL.finditer(part)}
        yield name, insns, labels


def audit(insns, labels, loop_max):
    loops = []  # (first, last) address of each backward branch's range
    for a, t in insns:
        m = BACK.search(t)
        if m and m.group(1) in labels and labels[m.group(1)] < a:
            loops.append((labels[m.group(1)], a))

    def innermost(a):
        spans = [hi - lo for lo, hi in loops if lo <= a <= hi]
        return min(spans) // 16 + 1 if spans else None

    bssy = [a for a, t in insns if t.startswith("BSSY") or " BSSY" in t]
    hot = [a for a in bssy if (n := innermost(a)) is not None and n <= loop_max]
    mufu = sum(1 for a, t in insns if "MUFU" in t and (n := innermost(a)) is not None and
               n <= loop_max)
    return len(insns) * 16, len(bssy), len(hot), mufu


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("files", nargs="*")
    ap.add_argument("--loop-max", type=int, default=800, help="instructions in a hot loop")
    ap.add_argument("--top", type=int, default=12, help="kernels per file")
    ap.add_argument("--nvdisasm", default="/tmp/nvd/x/nvidia/cu13/bin/nvdisasm")
    args = ap.parse_args()
    if not os.path.exists(args.nvdisasm):
        sys.exit(f"no nvdisasm at {args.nvdisasm}: see this script's docstring")
    files = args.files or sorted(glob.glob("src/backend/cuda/*.cu"))
    print(f"{'bytes':>7} {'bssy':>5} {'in loops':>8} {'mufu':>5}  kernel (loops of <= {args.loop_max} "
          "instructions)")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        for f in files:
            subprocess.run(["nvcc", *CUBIN_FLAGS, "-o", cubin, f], check=True)
            sass = subprocess.run([args.nvdisasm, "-c", cubin], check=True, capture_output=True,
                                  text=True).stdout
            rows = []
            for name, insns, labels in kernels(sass):
                rows.append((*audit(insns, labels, args.loop_max), name))
            names = demangle([r[4] for r in rows])
            rows = [(*r[:4], short(n)) for r, n in zip(rows, names)]
            for size, n_bssy, n_hot, n_mufu, name in sorted(rows, key=lambda r: -r[2])[:args.top]:
                print(f"{size:>7} {n_bssy:>5} {n_hot:>8} {n_mufu:>5}  "
                      f"{os.path.basename(f)}: {name}")


if __name__ == "__main__":
    main()
