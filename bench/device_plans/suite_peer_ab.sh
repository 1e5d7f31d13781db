#!/usr/bin/env bash
# The second call of an issue rerun, on the machine measure_ours.sh left warm (its synth files in
# /tmp, llama.cpp built in /tmp/peer, .devrun unpacked): the whole op suite with the default
# switches (the model tests' fixtures carried by this call: `.devrun/shared/fixtures/reference`),
# then an A/B of the 8B Q4_K_M's decode (ab_decode.sh with FORMS and AB_ENV, on measure_ours.sh's
# file; TRACE=0), then llama.cpp on the same files (SIDES=peer peer_side_by_side.sh, which
# deletes the 8B file after its part: so the A/B first). AB=0: no A/B.
# Here: `bash scripts/device_stage.sh`; there (device tool, after measure_ours.sh, carry
# [".devrun/shared/fixtures/reference"]): `FORMS=... bash bench/device_plans/suite_peer_ab.sh`.
cd "$(dirname "$0")/../.." || exit 1
export OUT=${OUT:-/tmp/suite}
mkdir -p "$OUT"
(
  # shellcheck source=bench/device_plans/common.sh
  source bench/device_plans/common.sh
  op_tests '*'
)
if [ "${AB:-1}" = 1 ]; then
  # shellcheck disable=SC2086  # AB_ENV: VAR=value pairs for the A/B's op tests, split on purpose
  env ${AB_ENV:-} OUT=/tmp/ab AB_MODEL=/tmp/qwen3-8b-Q4_K_M.gguf TRACE=0 \
    TESTS="${AB_TESTS:-CudaBf16*:Cuda.Matmul*}" bash bench/device_plans/ab_decode.sh
fi
SIDES=peer bash bench/device_plans/peer_side_by_side.sh
echo "t=$SECONDS s"
bash bench/device_plans/bundle_out.sh  # the peer's folders: one file
