#!/usr/bin/env bash
# Where an 8B prompt step goes now that its GEMMs run on wgmma (docs/CUDA.md stage 54: BF16
# prompts 13.8-16.5k tok/s on the H200 against llama.cpp's 22.6-24.1k, while the GEMMs alone
# would allow ~30k): the per-op GPU times of TEMPO9_CUDA_PROFILE=1 (graphs and dependent launches
# off, each op timed by an event pair) for a 512- and a 4096-token prompt, one generated token,
# then the same prompts timed without the profiler. QUANTS ("BF16 Q4_K_M"): the 8B files to make
# and read (BF16's synth takes ~10 s, Q4_K_M's ~100 s).
# Here: `bash scripts/device_stage.sh`; there (device tool, carry [".devrun/bin",
# ".devrun/lib.tar.xz", ".devrun/shared/fixtures/tokenizers"]): `bash
# bench/device_plans/prompt_profile.sh` (stdout; ~3 min with both files).
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/pp}
mkdir -p "$OUT"
# shellcheck source=bench/device_plans/common.sh
source bench/device_plans/common.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
for q in ${QUANTS:-BF16 Q4_K_M}; do
  M=/tmp/qwen3-8b-$q.gguf
  SIDES=ours PRESET=qwen3-8b QUANT=$q MODEL=$M OUT="$OUT/synth_$q" bash bench/h200_bench.sh synth \
    2>&1 | grep -E "^synth"
  for n in 512 4096; do  # 'x' is one token of the synthetic vocabulary
    p=$(python3 -c "print('x'*$n)")
    TEMPO9_CUDA_PROFILE=1 "$T9" run -m "$M" --raw -p "$p" -n 1 --temp 0 --ignore-eos \
      --backend cuda --ctx $((n + 64)) >/dev/null 2>"$OUT/profile_${q}_$n.txt"
    echo "== 8B $q, a $n-token prompt, profiled:"
    grep -E '\[cuda profile\]' "$OUT/profile_${q}_$n.txt" | head -24
    "$T9" run -m "$M" --raw -p "$p" -n 16 --temp 0 --ignore-eos --backend cuda \
      --ctx $((n + 64)) --warmup >/dev/null 2>/tmp/e.txt
    echo "8B $q, $n tokens, unprofiled: $(grep -E '^\[prompt' /tmp/e.txt | tr '\n' ' ')"
  done
  rm -f "$M"
done
echo "t=$((SECONDS - T0)) s"
bash bench/device_plans/bundle_out.sh
