// The plan of a synthetic GGUF: every tensor's llama.cpp name, shape, storage type and how its
// random values are drawn, in file order (token_embd, blk.0 ... blk.N-1, output_norm, output).
// Names and shapes are exactly those model/weights.cpp loads (and llama.cpp's loaders create).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "model/synth/synth_shape.h"
#include "quant/types.h"

namespace t9::synth {

// The --quant choices: plain types, and llama.cpp's k-quant mixes (see synth_mix.cpp).
enum class SynthQuant { F32, F16, BF16, Q8_0, Q4_0, Q6_K, Q4_K_M, Q3_K_M, Q5_K_M };

Result<SynthQuant> quant_from_name(std::string_view name);
std::string_view quant_name(SynthQuant q);
uint32_t llama_ftype(SynthQuant q);  // general.file_type (llama_ftype enum value)

// How a tensor's values are drawn (all from a counter-based generator keyed by seed and name).
enum class Init {
  kMatrix,  // zero-mean, std = scale (1 / sqrt(fan_in) for projections)
  kNorm,    // 1 + small noise: RMSNorm weights as stored in the file
  kBias,    // zero-mean, std = scale
  kSsmA,    // -exp(A_log) with A in [1, 8]: per-head decay rates (HF initialises A in [0, 16])
  kDtBias,  // softplus^-1(dt) with dt log-uniform in [1e-3, 1e-1], as HF initialises dt_bias
};

struct TensorPlan {
  std::string name;
  std::vector<int64_t> ne;  // ggml order, ne[0] contiguous (the fan-in of a projection)
  GgmlType type = GgmlType::F32;
  Init init = Init::kMatrix;
  float scale = 1.0f;
  int64_t n_elements() const;
  uint64_t n_bytes() const;  // row_bytes(type, ne[0]) * rows
};

// The whole plan; the types follow `quant` (llama.cpp's choices per tensor).
Result<std::vector<TensorPlan>> make_plan(const SynthShape& shape, SynthQuant quant);

// Picks each tensor's type the way llama.cpp's llama-quantize does for the ftype, given every
// tensor of the plan in file order (its counters depend on the order). Fills TensorPlan::type.
void assign_types(const SynthShape& shape, SynthQuant quant, std::vector<TensorPlan>& plan);

}  // namespace t9::synth
