#!/usr/bin/env bash
# CUDA op tests and GEMV timings on the device machine, built here (no GPU needed to build).
#
#   scripts/device_test_ops.sh build    # here: build test_ops, tempo9 + bench into build-cuda,
#                                       # stage the binaries (stripped, xz: each carries ~20 MB
#                                       # of sm_90/sm_90a code that compresses 10x), their
#                                       # non-system shared libraries, the model fixtures and a
#                                       # 3-block SmolLM2 (the whole file is over a call's 64
#                                       # MiB) under .devrun/ (git-ignored via .git/info/exclude)
#   scripts/device_test_ops.sh device   # there (repo root, .devrun carried): the CUDA tests, the
#                                       # bench, run/serve --backend cuda, compute-sanitizer on a
#                                       # subset; logs in $OUT
#   scripts/device_test_ops.sh mma      # there: every CUDA test, sanitizers on the sliced
#                                       # matmul kernels, the GEMV/GEMM bench new vs legacy
#   scripts/device_test_ops.sh check    # there: every CUDA test (TESTS: a gtest filter; the
#                                       # parameterized suites carry a prefix: Hybrid/Cuda...),
#                                       # memcheck + racecheck on the attention, matmul_id and
#                                       # GDN tests (MEMCHECK_TESTS, RACECHECK_TESTS); logs in $OUT
#   scripts/device_test_ops.sh attn     # there: the attention tests, then cuda_attention_bench
#                                       # (agent-workload shapes: us, TFLOP/s, GB/s per case)
#   scripts/device_test_ops.sh gdn      # there: the Gated DeltaNet tests, then cuda_gdn_bench
#                                       # (Qwen3.5-35B shapes: us per call, ns per token)
#   scripts/device_test_ops.sh gemm     # there: cuda_moe_bench (Qwen3.5-35B expert and dense
#                                       # Q8_0 matmuls at 8 / 512 / 2048 rows), then ncu on the
#                                       # 2048-row tensor-core calls (stall reasons, occupancy)
#   scripts/device_test_ops.sh hybrid   # there: `check` for the MoE / Gated DeltaNet tests
#                                       # only (CudaHybrid*, CudaGdn*); logs in $OUT
#   scripts/device_test_ops.sh ncuop    # there: ncu on one bench case (NCU_BENCH, NCU_ARGS,
#                                       # NCU_KERNEL): sections and per-instruction stalls
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${TEMPO9_CUDA_BUILD:-$ROOT/build-cuda}
STAGE=$ROOT/.devrun

stage() {
  set -e
  if [ ! -f "$BUILD/build.ninja" ]; then
    # --as-needed keeps cuBLAS (linked by cmake/Tempo9Cuda.cmake, unused in stage 1) out of the
    # binaries' needs. CMake 3.25 has no C++20 flag for nvcc: give it.
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DTEMPO9_CUDA=ON -DCMAKE_EXE_LINKER_FLAGS=-Wl,--as-needed \
      -DCMAKE_CUDA20_STANDARD_COMPILE_OPTION=-std=c++20 \
      -DCMAKE_CUDA20_EXTENSION_COMPILE_OPTION=-std=c++20
  fi
  # The binaries (stripped, xz), their libraries, the fixtures and the tokenizer.
  rm -rf "$STAGE"
  TEMPO9_CUDA_BUILD=$BUILD bash "$ROOT/scripts/device_stage.sh" cuda_gemv_bench \
    cuda_attention_bench cuda_gdn_bench cuda_moe_bench cuda_op_chain_bench
  local models=${TEMPO9_MODELS:-$HOME/.cache/tempo9/models}
  python3 "$ROOT/dev/kernels/cuda_truncate_gguf.py" "$models/SmolLM2-135M-Instruct.Q4_1.gguf" \
    "$STAGE/smol3.gguf" --blocks 3
  du -sh "$STAGE"
  echo "device command (run tool, carry [\".devrun\"]):"
  echo "  bash scripts/device_test_ops.sh device"
}

# tempo9 run on the 3-block SmolLM2, CPU vs CUDA (greedy), then serve --backend cuda and one
# /v1/chat/completions request.
run_and_serve() {
  local t9=$STAGE/bin/tempo9 m=$STAGE/smol3.gguf
  local prompt="What is the capital of France? Answer in one sentence."
  local tmp=/tmp/t9run
  mkdir -p $tmp
  "$t9" run -m "$m" -p "$prompt" -n 32 --temp 0 --backend cpu >$tmp/cpu.txt 2>$tmp/cpu.err
  "$t9" run -m "$m" -p "$prompt" -n 32 --temp 0 --backend cuda >$tmp/cuda.txt 2>$tmp/cuda.err
  echo "run cpu : $(head -c 300 $tmp/cpu.txt | tr '\n' ' ') | $(tail -1 $tmp/cpu.err)"
  echo "run cuda: $(head -c 300 $tmp/cuda.txt | tr '\n' ' ') | $(tail -1 $tmp/cuda.err)"
  if cmp -s $tmp/cpu.txt $tmp/cuda.txt; then echo "run: cpu == cuda"; else echo "run: cpu != cuda"; fi
  "$t9" serve -m "$m" --backend cuda --port 18411 --kv-memory 1G >$tmp/serve.log 2>&1 &
  local pid=$!
  for _ in $(seq 60); do
    curl -sf http://127.0.0.1:18411/v1/models >/dev/null 2>&1 && break
    sleep 0.5
  done
  curl -s -m 60 http://127.0.0.1:18411/v1/chat/completions -H 'Content-Type: application/json' \
    -d "{\"messages\":[{\"role\":\"user\",\"content\":\"$prompt\"}],\"max_tokens\":32,\"temperature\":0}" \
    >$tmp/reply.json 2>&1
  echo "serve reply: $(head -c 600 $tmp/reply.json)"
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  tail -3 $tmp/serve.log
}

# Binaries unpacked (xz), their libraries and the fixtures found.
unpack() {
  export LD_LIBRARY_PATH=$STAGE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  python3 "$ROOT/scripts/devrun_unpack.py" "$STAGE"
  export TEMPO9_SHARED_DIR=$STAGE/shared
}

device() {
  unpack
  OUT=${OUT:-/tmp/t9out}
  mkdir -p "$OUT"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv 2>&1 | tee "$OUT/bench.log"
  "$STAGE/bin/test_cuda_ops" --gtest_filter='Cuda*:*/Cuda*' --gtest_color=no 2>&1 |
    tee "$OUT/test_ops.log" | grep -E '^\[  (PASSED|FAILED) |cuda model|cuda matmul|Failure' | head -60
  local rc=${PIPESTATUS[0]}
  run_and_serve 2>&1 | tee "$OUT/run_serve.log"
  # Ceiling for the GEMV table: a large device-to-device copy through PyTorch when the image has
  # it (KINDS.md: ~4.3 TB/s read + write), else the bench's default.
  local ceiling
  ceiling=$(python3 - 2>/dev/null <<'PY'
import torch
a = torch.randint(0, 255, (4 << 30,), dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
for _ in range(3): b.copy_(a)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
ts = []
for _ in range(10):
    s.record(); b.copy_(a); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
print(round(2 * (4 << 30) / sorted(ts)[5] / 1e6))
PY
  )
  echo "copy ceiling (torch D2D, read + write): ${ceiling:-unmeasured} GB/s" | tee -a "$OUT/bench.log"
  "$STAGE/bin/cuda_gemv_bench" ${ceiling:+"$ceiling"} 2>&1 | tee -a "$OUT/bench.log"
  # Q4_K decode variants (rows per warp, register cap): the matmul tests, then the bench.
  for v in r2b8 r1b8 r4b4; do
    TEMPO9_CUDA_Q4K=$v "$STAGE/bin/test_cuda_ops" --gtest_filter='Cuda.Matmul*' --gtest_color=no \
      2>&1 | grep -E '^\[  (PASSED|FAILED) ' | sed "s/^/$v /" | tee -a "$OUT/bench.log"
    TEMPO9_CUDA_Q4K=$v "$STAGE/bin/cuda_gemv_bench" ${ceiling:-4263} Q4_K 2>&1 |
      grep -E '^Q4_K .* 1 ' | sed "s/^/$v /" | tee -a "$OUT/bench.log"
  done
  # A/B: Q4_K through the shared-memory staged kernel instead of the direct one.
  TEMPO9_CUDA_STAGED=1 "$STAGE/bin/cuda_gemv_bench" ${ceiling:-4263} Q4_K 2>&1 |
    grep -E '^Q4_K' | sed 's/^/staged /' | tee -a "$OUT/bench.log"
  # Hardware counters of two Q4_K decode GEMV launches (Firecracker machines allow ncu).
  timeout "${NCU_S:-90}" ncu --clock-control none -k regex:gemv_q4k_direct -s 3 -c 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
    "$STAGE/bin/cuda_gemv_bench" ${ceiling:-4263} Q4_K >"$OUT/ncu.log" 2>&1
  grep -E 'Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Grid Size|Dynamic Shared|Block Limit' "$OUT/ncu.log" | head -40
  # Memory checker on one quick pass of the kernels (Firecracker machines support it).
  timeout "${MEMCHECK_S:-150}" compute-sanitizer --tool memcheck --print-limit 20 \
    "$STAGE/bin/test_cuda_ops" --gtest_filter='Cuda.GetRows*:Cuda.Elementwise*:Cuda.RmsNorm*:Cuda.ArgmaxTopK*:Cuda.Rope*:CudaAttention.SlidingWindow*:Cuda.MatmulBatch*' \
    --gtest_color=no >"$OUT/memcheck.log" 2>&1
  echo "memcheck rc $? : $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck.log" | tail -3 | tr '\n' ' ')"
  echo "test_ops rc $rc: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_ops.log" | tr '\n' ' ')"
  return "$rc"
}

# Every CUDA test, then the sanitizers on the attention and matmul_id tests (split-K attention
# kernel, matmul_id's device route).
check() {
  unpack
  OUT=${OUT:-/tmp/t9out}
  mkdir -p "$OUT"
  "$STAGE/bin/test_cuda_ops" --gtest_filter="${TESTS:-Cuda*:*/Cuda*}" --gtest_color=no 2>&1 |
    tee "$OUT/test_ops.log" | grep -E '^\[  (PASSED|FAILED) |cuda attention|cuda gdn|Failure' | head -40
  local rc=${PIPESTATUS[0]}
  local f=${MEMCHECK_TESTS:-'CudaAttention*:CudaHybrid.MatmulId*:CudaGdn.GatedDeltaNet*:-CudaHybrid.MatmulIdBad*'}
  timeout "${MEMCHECK_S:-150}" compute-sanitizer --tool memcheck --print-limit 20 \
    "$STAGE/bin/test_cuda_ops" --gtest_filter="$f" --gtest_color=no >"$OUT/memcheck.log" 2>&1
  echo "memcheck rc $? : $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck.log" | tail -3 | tr '\n' ' ')"
  f=${RACECHECK_TESTS:-'CudaAttention.F16PoolGqa*:CudaAttention.LongContext*:CudaGdn.GatedDeltaNet*'}
  timeout "${RACECHECK_S:-120}" compute-sanitizer --tool racecheck --print-limit 20 \
    "$STAGE/bin/test_cuda_ops" --gtest_filter="$f" --gtest_color=no >"$OUT/racecheck.log" 2>&1
  echo "racecheck rc $? : $(grep -E 'RACECHECK SUMMARY|PASSED|FAILED' "$OUT/racecheck.log" | tail -3 | tr '\n' ' ')"
  echo "test_ops rc $rc: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_ops.log" | tr '\n' ' ')"
  return "$rc"
}

# The attention ops (tests/ops/cuda_attention_test.cpp, cuda_attention_row_test.cpp), then their timings at model shapes.
# tests_then_bench FILTER TEST_LOG BENCH BENCH_LOG ITERS: the CUDA tests matching FILTER, then
# BENCH ITERS; the tests' exit status.
tests_then_bench() {
  unpack
  OUT=${OUT:-/tmp/t9out}
  mkdir -p "$OUT"
  "$STAGE/bin/test_cuda_ops" --gtest_filter="$1" --gtest_color=no 2>&1 |
    tee "$OUT/$2" | grep -E '^\[  (PASSED|FAILED) |Failure'
  local rc=${PIPESTATUS[0]}
  "$STAGE/bin/$3" "$5" 2>&1 | tee "$OUT/$4"
  return "$rc"
}

attn() {
  tests_then_bench 'CudaAttention*' test_ops.log cuda_attention_bench attention_bench.log \
    "${ATTN_ITERS:-20}"
}

gdn() {
  tests_then_bench 'CudaGdn.GatedDeltaNet*:MoeHybrid/*' test_gdn.log cuda_gdn_bench \
    gdn_bench.log "${GDN_ITERS:-20}"
}

gemm() {
  unpack
  OUT=${OUT:-/tmp/t9out}
  mkdir -p "$OUT"
  "$STAGE/bin/cuda_moe_bench" ${GEMM_ITERS:-20} 2>&1 | tee "$OUT/moe_bench.log"
  local ncu c i=0
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  local cases=${GEMM_NCU_CASES:-'expert gate/up, 2048|expert down, 2048|dense 2048->8192'}
  local IFS='|'
  for c in $cases; do
    i=$((i + 1))
    echo "== ncu $i: $c (full report: $OUT/ncu_gemm_$i.txt)"
    timeout "${NCU_S:-120}" "$ncu" --clock-control none -k regex:mma_kernel --launch-skip 1 \
      --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
      --section WarpStateStats --section SchedulerStats --section InstructionStats \
      --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      "$STAGE/bin/cuda_moe_bench" 1 "$c" >"$OUT/ncu_gemm_$i.txt" 2>&1
    grep -E 'Duration|Throughput|Registers Per|Achieved Occupancy|Block Limit (Reg|Shared)|Issued Ipc|Eligible Warps|Warp Cycles Per Issued|stalled|Est. Speedup' \
      "$OUT/ncu_gemm_$i.txt" | head -24
  done
}

# The MoE / hybrid ops and models only (tests/ops/cuda_hybrid_test.cpp, cuda_gdn_test.cpp), with the sanitizers.
hybrid() {
  TESTS=${TESTS:-'CudaHybrid*:CudaGdn*:MoeHybrid/CudaModel.*:Hybrid/CudaHybridModel.*'} \
    MEMCHECK_TESTS=${MEMCHECK_TESTS:-'CudaHybrid.*:CudaGdn.*:-CudaHybrid.MatmulIdBad*'} \
    RACECHECK_TESTS=${RACECHECK_TESTS:-'CudaGdn.GatedDeltaNet*'} check
}

# The tensor-core matmul (cuda_mma.cu) and the sliced GEMV (cuda_gemv_slice.cu): every CUDA
# test, compute-sanitizer memcheck and racecheck on the sliced-kernel tests, the GEMV/GEMM bench
# with the new kernels and with TEMPO9_CUDA_LEGACY_GEMV=1 (the previous GEMV, same run).
mma() {
  unpack
  OUT=${OUT:-/tmp/t9out}
  mkdir -p "$OUT"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv 2>&1 | tee "$OUT/bench.log"
  "$STAGE/bin/test_cuda_ops" --gtest_filter="${TESTS:-Cuda*:*/Cuda*}" --gtest_color=no 2>&1 |
    tee "$OUT/test_ops.log" | grep -E '^\[  (PASSED|FAILED) |cuda matmul|Failure|^\[  FAILED' | head -40
  local rc=${PIPESTATUS[0]}
  timeout "${MEMCHECK_S:-120}" compute-sanitizer --tool memcheck --print-limit 20 \
    "$STAGE/bin/test_cuda_ops" --gtest_filter='Cuda.MatmulSliced*:Cuda.MatmulBatch*' \
    --gtest_color=no >"$OUT/memcheck.log" 2>&1
  echo "memcheck rc $? : $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck.log" | tail -3 | tr '\n' ' ')"
  timeout "${RACECHECK_S:-120}" compute-sanitizer --tool racecheck \
    --print-limit 20 "$STAGE/bin/test_cuda_ops" --gtest_filter='Cuda.MatmulBatchInvariant' \
    --gtest_color=no >"$OUT/racecheck.log" 2>&1
  echo "racecheck rc $? : $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$OUT/racecheck.log" | tail -3 | tr '\n' ' ')"
  local ceiling=${CEILING:-4234}
  "$STAGE/bin/cuda_gemv_bench" "$ceiling" 2>&1 | tee -a "$OUT/bench.log" | grep -E '^(Q4_K|Q6_K|Q8_0|type)'
  for t in Q4_K Q6_K Q8_0; do
    TEMPO9_CUDA_LEGACY_GEMV=1 "$STAGE/bin/cuda_gemv_bench" "$ceiling" $t 2>&1 |
      grep -E "^$t .* (1|8|512) " | sed 's/^/legacy /' | tee -a "$OUT/bench.log"
  done
  # One activation row through gemv_slice_kernel (per-lane slices, packed activations) instead
  # of gemv_coal_kernel (coalesced unit dots, slice sums through shared memory); same bits.
  for t in Q4_K Q6_K Q8_0; do
    TEMPO9_CUDA_GEMV_SLICED=1 "$STAGE/bin/cuda_gemv_bench" "$ceiling" $t 2>&1 |
      grep -E "^$t .* 1 " | sed 's/^/slice-1row /' | tee -a "$OUT/bench.log"
  done
  # Measured before (bench/h200_results/run10-13): TEMPO9_CUDA_MMA_NT=2 (32-row mma tiles
  # everywhere), TEMPO9_CUDA_MMA_ROWS=4, TEMPO9_CUDA_Q4K_ROWS=1, TEMPO9_CUDA_Q4K_STAGED=1.
  echo "test_ops rc $rc: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_ops.log" | tr '\n' ' ')"
  return "$rc"
}

# ncu on one case of a bench, to see where a kernel's warps wait (docs/CUDA.md, stage 21):
# NCU_BENCH (cuda_op_chain_bench, or cuda_gemv_bench), NCU_ARGS (its arguments, word-split:
# "8 moe_route", or "4263 Q4_K 4096x4096"), NCU_KERNEL (a regex on the demangled name, e.g.
# gemv_coal; default every kernel), NCU_SKIP (4) and NCU_COUNT (1) launches. The detailed sections
# go to $OUT/ncuop.txt; the per-instruction table, sampled every 32 cycles, to $OUT/ncuop_sass.csv,
# summarised by bench/ncu_sass.py ($OUT/ncuop_sass.txt).
ncuop() {
  unpack
  OUT=${OUT:-/tmp/t9out}
  mkdir -p "$OUT"
  local bench=$STAGE/bin/${NCU_BENCH:-cuda_op_chain_bench} pick=() args=()
  [ -n "${NCU_KERNEL:-}" ] && pick=(--kernel-name-base demangled -k "regex:$NCU_KERNEL")
  # NCU_ARGS: the bench's arguments as shell words (quotes group: "20 '8B decode 1 row'")
  eval "args=(${NCU_ARGS:-8})"
  timeout "${NCU_S:-120}" ncu --clock-control none "${pick[@]}" --launch-skip "${NCU_SKIP:-4}" \
    --launch-count "${NCU_COUNT:-1}" --section LaunchStats --section SpeedOfLight \
    --section Occupancy --section SchedulerStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section InstructionStats --section SourceCounters \
    "$bench" "${args[@]}" >"$OUT/ncuop.txt" 2>&1
  echo "ncu rc $?"
  grep -E "Grid Size|Registers Per|Duration|Memory Throughput|Achieved Occupancy|Issued Ipc|No Eligible|Warp Cycles Per Issued" \
    "$OUT/ncuop.txt" | head -24
  timeout "${NCU_S:-120}" ncu --clock-control none "${pick[@]}" --launch-skip "${NCU_SKIP:-4}" \
    --launch-count 1 --warp-sampling-interval 0 --section SourceCounters --page source \
    --print-source sass --csv "$bench" "${args[@]}" >"$OUT/ncuop_sass.csv" 2>&1
  python3 "$ROOT/bench/ncu_sass.py" "$OUT/ncuop_sass.csv" | tee "$OUT/ncuop_sass.txt" | head -60
}

case "${1:-}" in
  build) stage ;;
  device) device ;;
  hybrid) hybrid ;;
  mma) mma ;;
  check) check ;;
  attn) attn ;;
  gdn) gdn ;;
  gemm) gemm ;;
  ncuop) ncuop ;;
  *) echo "usage: $0 build|device|check|attn|gdn|gemm|hybrid|mma|ncuop" >&2; exit 2 ;;
esac
