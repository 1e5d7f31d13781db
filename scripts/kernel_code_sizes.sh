#!/usr/bin/env bash
# The sm_90a code size of every kernel in the named CUDA sources (kB: 1000 bytes), largest first:
# each source is compiled to a cubin with its build command from build-cuda2 (or BUILD), and each
# kernel's .text section is read with readelf (this machine has no cuobjdump or nvdisasm). A
# decode kernel's code is fetched cold by every SM at each launch, so a large one may cost
# microseconds on the step's chain. The GDN chain was 158 kB (gdn_regs_kernel: 24 kB) until its
# rows stopped inlining TensorDesc::row's division path (docs/CUDA.md stage 57).
#   bash scripts/kernel_code_sizes.sh cuda_gdn cuda_gdn_chain      # sources under src/backend/cuda
#   TOP=20 MATCH='gdn|conv' bash scripts/kernel_code_sizes.sh cuda_gdn
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-cuda2}
export PATH=/usr/local/cuda/bin:$PATH
[ $# -gt 0 ] || { echo "usage: $0 SOURCE... (names under src/backend/cuda, without .cu)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for src in "$@"; do
  obj=CMakeFiles/tempo9_cuda.dir/src/backend/cuda/$src.cu.o
  cmd=$(ninja -C "$BUILD" -t commands "$obj" | tail -1 | sed 's/^.*ccache //')
  [ -n "$cmd" ] || { echo "$src: no build command in $BUILD" >&2; exit 1; }
  # One architecture, a cubin instead of an object; the build's -o comes first, ours wins.
  cmd=$(sed -E 's/-gencode[= ][^ ]*//g; s/ -c / -cubin -arch=sm_90a /' <<<"$cmd")
  if ! (cd "$BUILD" && eval "$cmd -o $tmp/$src.cubin") 2>"$tmp/err"; then
    cat "$tmp/err" >&2
    exit 1
  fi
  readelf -S --wide "$tmp/$src.cubin" 2>/dev/null | SRC=$src python3 -c '
import os, re, sys
for line in sys.stdin:
    m = re.search(r"\.text\.(\S+)\s+PROGBITS\s+\S+\s+\S+\s+([0-9a-f]+)", line)
    if m:
        name = re.sub(r"^_ZN.*?_GLOBAL__N__\w+?_cu_[0-9a-f]+", "", m.group(1))
        print(int(m.group(2), 16), os.environ["SRC"], name)
'
done | sort -rn | { grep -E "${MATCH:-.}" || true; } | head -n "${TOP:-30}" |
  awk '{printf "%8.1f kB  %-22s %s\n", $1 / 1000, $2, $3}'
