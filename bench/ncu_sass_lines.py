#!/usr/bin/env python3
"""ncu's warp samples per SASS instruction (`ncu --page source --print-source sass --csv`, the
device plans' NCU_SASS=1) summed by source file and line, through `nvdisasm -g` of the same kernel
compiled here with -lineinfo.

A build-dev staging carries no line info, but compiling the same source here with -lineinfo gives
the same instructions (docs/CUDA.md stage 60: run 283's attention and gate/up kernels matched one
for one), and nvdisasm -g names each instruction's line. The script checks that the two listings
have the same instruction count and opcodes before it trusts the pairing.

  # the cubin (build-dev's command for the source, one architecture, line info):
  cmd=$(ninja -C build-dev -t commands CMakeFiles/tempo9_cuda.dir/src/backend/cuda/X.cu.o |
        tail -1 | sed 's/^.*ccache //')
  cmd=$(sed -E 's/-gencode[= ][^ ]*//g; s/ -c / -cubin -arch=sm_90a -lineinfo /' <<<"$cmd")
  (cd build-dev && eval "$cmd -o /tmp/x.cubin")
  nvdisasm -g -c /tmp/x.cubin > /tmp/x.sass   # nvdisasm: dev/kernels/sass_branches.py says where
  python3 bench/ncu_sass_lines.py SASS.csv /tmp/x.sass --function 'flash_attention_kernelILi256ELb0'

--function is a regex on the mangled name of nvdisasm's .text section (the first match is used);
--kernel picks the CSV's kernel when it holds several (0-based, default 0).
"""
import argparse
import collections
import csv
import re
import sys


def sass_lines(path, pattern):
    """(opcode, 'file:line') per instruction of the first function whose name matches."""
    text = open(path).read().split("\n")
    starts = [i for i, line in enumerate(text) if line.startswith(".text.")]
    pick = next((i for i in starts if re.search(pattern, text[i])), None)
    if pick is None:
        sys.exit(f"{path}: no function matches {pattern!r}")
    end = next((i for i in starts if i > pick), len(text))
    out, where = [], "?"
    for line in text[pick:end]:
        m = re.search(r'## File "([^"]+)", line (\d+)', line)
        if m:
            where = f"{m.group(1).split('/')[-1]}:{m.group(2)}"
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)", line)
        if m:
            out.append((m.group(1), where))
    return out


def ncu_rows(path, kernel):
    rows = list(csv.reader(open(path, newline="")))
    heads = [i for i, r in enumerate(rows) if r and r[0] == "Address"]
    if kernel >= len(heads):
        sys.exit(f"{path}: {len(heads)} kernels in the CSV, asked for {kernel}")
    h0 = heads[kernel]
    end = heads[kernel + 1] if kernel + 1 < len(heads) else len(rows)
    head = rows[h0]
    body = [r for r in rows[h0 + 1:end] if len(r) == len(head)]
    return head, body


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("sass", help="nvdisasm -g -c output")
    ap.add_argument("--function", required=True)
    ap.add_argument("--kernel", type=int, default=0)
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    lines = sass_lines(a.sass, a.function)
    head, body = ncu_rows(a.csv, a.kernel)
    if len(lines) != len(body):
        sys.exit(f"{len(lines)} instructions here against {len(body)} in the CSV: not the same code")
    src = head.index("Source")
    mismatched = sum(1 for (op, _), r in zip(lines, body) if op.split(".")[0] not in r[src])
    if mismatched:
        sys.exit(f"{mismatched} opcodes differ between the listings: not the same code")
    samples = head.index("Warp Stall Sampling (All Samples)")
    executed = head.index("Instructions Executed")
    by_line, by_file = collections.Counter(), collections.Counter()
    ex_line, ex_file = collections.Counter(), collections.Counter()
    for (_, where), r in zip(lines, body):
        s, e = int(r[samples] or 0), int(r[executed] or 0)
        f = where.split(":")[0]
        by_line[where] += s
        ex_line[where] += e
        by_file[f] += s
        ex_file[f] += e
    ts, te = max(1, sum(by_line.values())), max(1, sum(ex_line.values()))
    print(f"{sum(by_line.values())} samples, {sum(ex_line.values())} warp instructions executed")
    print("by file:")
    for f, v in by_file.most_common():
        print(f"  {f:32s} samples {100 * v / ts:5.1f}%  executed {100 * ex_file[f] / te:5.1f}%")
    print(f"by line (top {a.top}):")
    for k, v in by_line.most_common(a.top):
        print(f"  {v:6d} {100 * v / ts:5.1f}%  executed {ex_line[k]:8d}  {k}")


if __name__ == "__main__":
    main()
