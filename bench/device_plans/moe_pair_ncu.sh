#!/usr/bin/env bash
# Where the experts' by-pair gate/up loses ~1.6 us to a dense int8 GEMV of the same 19.6 MB
# (runs 300-301, bench/cuda_moe_decode_bench.cpp; docs/CUDA.md stage 67): ncu on the one-row
# Q8_0 GEMV kernels (the pairs': gemv_slice_kernel<Q8_0, 1, true, 2, 2>) in three of the bench's
# cases, dense on the int8 path (TEMPO9_CUDA_BF16_Q8_0=0), graphs off so that each call is its
# own launch: the pairs by ids, the pairs routing in the launch, and the dense matrix. Per
# case: duration, DRAM throughput, occupancy, the warp states and the scheduler's issue rate
# (~1.5 min).
# Here: `bash scripts/device_stage.sh cuda_moe_decode_bench` (TEMPO9_CUDA_BUILD); there (device
# tool, carry [".devrun"]): `bash bench/device_plans/moe_pair_ncu.sh`.
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/mpn}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
B=.devrun/bin/cuda_moe_decode_bench
# The one-row Q8_0 kernels (the dense call may take the coalesced form; the log names it).
K='gemv_(slice|coal)_kernel<\(t9::GgmlType\)8'
for c in "ids:gate/up by ids" "route:route + gate/up (" "dense:dense 2048"; do
  tag=${c%%:*}
  echo "== $tag (${c#*:})"
  TEMPO9_CUDA_GRAPHS=0 TEMPO9_CUDA_BF16_Q8_0=0 timeout 120 ncu --clock-control none \
    --kernel-name-base demangled -k "regex:$K" --launch-skip 20 --launch-count 1 \
    --section LaunchStats --section SpeedOfLight --section Occupancy --section SchedulerStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis \
    "$B" 40 "${c#*:}" >"$OUT/ncu_$tag.txt" 2>&1
  echo "ncu rc $?"
  grep -E "^  [a-z_]+_kernel|Grid Size|Registers Per|Dynamic Shared|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Issued Ipc|No Eligible|Warp Cycles Per Issued|Stall|No kernels were profiled" \
    "$OUT/ncu_$tag.txt" | head -30
done
echo "t=$((SECONDS - T0)) s"
