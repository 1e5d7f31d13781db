#!/usr/bin/env python3
"""Registers, stack frames and spills of every CUDA kernel, from `nvcc -Xptxas -v` (sm_90a), with
the warps per SM the registers alone allow. No GPU needed.

Stage 21 (docs/CUDA.md) found the one-row GEMVs at 104-138 registers per thread: 3-4 blocks per
SM, and a latency-bound kernel with few warps. A `__launch_bounds__` minimum fixed it (8B decode
+9%). Run this after a kernel change to see such limits, and local-memory arrays (a stack frame
with no spills: an array indexed at run time) before the device does.

  python3 dev/kernels/ptxas_registers.py [--min-regs 96] [--stack] [FILE.cu ...]
      (default: every src/backend/cuda/*.cu; run from the repository root)
"""
import argparse
import glob
import re
import subprocess
import sys

# One file to an sm_90a cubin, as the build compiles it (sass_branches.py shares these).
CUBIN_FLAGS = ["-O3", "-DNDEBUG", "-DFMT_SHARED", "-DTEMPO9_HAVE_CUDA=1",
               "--expt-relaxed-constexpr", "-std=c++20", "-Isrc",
               "-gencode=arch=compute_90a,code=sm_90a", "-cubin"]
FLAGS = [*CUBIN_FLAGS, "-Xptxas", "-v", "-o", "/dev/null"]
REGS_PER_SM = 65536
MAX_WARPS = 64


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    return out.stdout.splitlines()


def short(name):
    name = re.sub(r"t9::cuda::(\(anonymous namespace\)::)?", "", name)
    name = name.replace("(t9::GgmlType)", "T")
    return re.sub(r"\(.*\)$", "", name)[:90]


def kernels(path):
    r = subprocess.run(["nvcc", *FLAGS, path], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"nvcc failed on {path}:\n{r.stderr[-2000:]}")
    found, name, frame = [], None, (0, 0)
    for line in r.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\S+)' for", line)
        if m:
            name = m.group(1)
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores", line)
        if m and name:
            frame = (int(m.group(1)), int(m.group(2)))
        m = re.search(r"Used (\d+) registers", line)
        if m and name:
            found.append((name, int(m.group(1)), *frame))
            name, frame = None, (0, 0)
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*")
    ap.add_argument("--min-regs", type=int, default=96, help="list kernels with at least this many")
    ap.add_argument("--stack", action="store_true", help="also every kernel with a stack frame")
    a = ap.parse_args()
    files = a.files or sorted(glob.glob("src/backend/cuda/*.cu"))
    print(f"{'regs':>4} {'warps/SM':>8} {'stack':>5} {'spill':>5}  kernel")
    for path in files:
        ks = kernels(path)
        names = demangle([k[0] for k in ks])
        for (_, regs, stack, spill), name in zip(ks, names):
            if regs < a.min_regs and not (a.stack and stack > 0):
                continue
            # Registers are allocated per warp in units of 256 (8 per thread).
            per_warp = ((regs + 7) // 8 * 8) * 32
            warps = min(MAX_WARPS, REGS_PER_SM // per_warp)
            print(f"{regs:4d} {warps:8d} {stack:5d} {spill:5d}  {path.split('/')[-1]}: {short(name)}")


if __name__ == "__main__":
    main()
