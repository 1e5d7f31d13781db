#!/usr/bin/env bash
# A Gated DeltaNet layer's launches on the 35B Q8_0's single decode (docs/CUDA.md stage 57). Run
# 270 (H100) found the chain (conv + delta rule in one launch, its conv-state count fenced before
# the wait) 7.5% slower than the two launches, and 12% with a fenced gated-norm tail (since
# removed); run 271's trace put that chain launch 19.5 us after the in-projection's end against
# 8.1 us for the three launches. Suspects: the kernel's code (158 KB of SASS then, 33 KB since its
# rows skip TensorDesc::row's division path) and the gpu-scope fences. Forms, alternated REPS
# times, every text compared with the first (all give the same bits):
#   off         the defaults: ssm_conv, gdn_regs, rms_norm_gated, the out-projection;
#   chain       TEMPO9_CUDA_FUSE_GDN=1 (the fenced count);
#   chain_late  the same with TEMPO9_CUDA_GDN_LATE_ARRIVAL=1 (a relaxed count, no fence);
#   gnm         off with TEMPO9_CUDA_FUSE_GATED_NORM_MATMUL=1 (the norm in the out-projection's
#               GEMV staging, one launch fewer);
#   late_gnm    chain_late and gnm together;
# then the op tests of both (when test_cuda_ops came too; OPS: another gtest filter, '*' for the
# whole suite, which wants .devrun/shared/fixtures/reference carried too) and one trace of
# late_gnm (bench/kernel_trace.py's table; TRACE=0: none; the trace is of the 40-layer file).
# SHORT=1: the 35B shape cut to 8 layers (qwen35moe_8layer.json, 6 of them Gated DeltaNet), a
# ~20 s synth instead of ~90 s.
# Here: build, `strip` + `xz -9` tempo9 and test_cuda_ops into .devrun/bin (scripts/device_stage.sh
# does that, and more); there (device tool, carry [".devrun/bin", ".devrun/lib.tar.xz",
# ".devrun/shared/fixtures/tokenizers"]): `bash bench/device_plans/gdn_chain_ab.sh`.
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/gca}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
M=/tmp/qwen3.5-35b-a3b-Q8_0-tok.gguf NAME="35B Q8_0"
S35="SINGLE_X=4096 GEN=128 PRESET=qwen3.5-35b-a3b QUANT=Q8_0 SIDES=ours TOKENIZER=$TOK MODEL=$M"
if [ "${SHORT:-0}" = 1 ]; then
  # shellcheck disable=SC2034  # NAME: read by common.sh's decode_one
  M=/tmp/q35_8l_Q8_0.gguf NAME="35B shape, 8 layers, Q8_0"
  [ -f "$M" ] || "$T9" synth --arch qwen35moe --config bench/device_plans/qwen35moe_8layer.json \
    --quant Q8_0 --seed 1 --tokenizer "$TOK" -o "$M" >/dev/null 2>&1 || echo "synth failed"
else
  # shellcheck disable=SC2086  # S35: word-split on purpose
  [ -f "$M" ] || env $S35 OUT="$OUT/synth" bash bench/h200_bench.sh synth 2>&1 | grep -E "^synth"
fi
GDN=TEMPO9_CUDA_FUSE_GDN LATE=TEMPO9_CUDA_GDN_LATE_ARRIVAL GNM=TEMPO9_CUDA_FUSE_GATED_NORM_MATMUL
for rep in $(seq "${REPS:-2}"); do
  decode_one "off_$rep" $GDN=0 $LATE=0 $GNM=0
  decode_one "chain_$rep" $GDN=1 $LATE=0 $GNM=0
  decode_one "chain_late_$rep" $GDN=1 $LATE=1 $GNM=0
  decode_one "gnm_$rep" $GDN=0 $LATE=0 $GNM=1
  decode_one "late_gnm_$rep" $GDN=1 $LATE=1 $GNM=1
done
for f in /tmp/one_*_[0-9].txt; do
  cmp -s /tmp/one_off_1.txt "$f" && echo "text $f: equal" || echo "text $f: DIFFERS from off_1"
done
[ -f .devrun/bin/test_cuda_ops ] && op_tests "${OPS:-CudaGdn.*:CudaBf16.*:CudaHybrid.*}"
if [ "${TRACE:-1}" = 1 ]; then
  # shellcheck disable=SC2086  # S35: word-split on purpose
  env $GDN=1 $LATE=1 $GNM=1 $S35 OUT="$OUT/trace" bash bench/h200_bench.sh trace >/dev/null 2>&1
  grep -A16 "chain us/step" -m1 "$OUT/trace/bench.log"
fi
echo "t=$((SECONDS - T0)) s"
bash bench/device_plans/bundle_out.sh
