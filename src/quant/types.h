// ggml tensor types: ids, block sizes and byte sizes exactly as GGUF files store them.
// Ids are part of the file format (gaps are ids ggml retired); never renumber.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace t9 {

enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3,
  Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

struct GgmlTypeTraits {
  GgmlType type;
  std::string_view name;  // as ggml and gguf-py spell it: "Q4_K", "BF16", ...
  uint32_t block_elems;   // elements per block (1 for plain types)
  uint32_t block_bytes;   // bytes per block
  bool quantized;
};

// Traits of a known type id, or nullopt for ids this build does not know (validation reports
// those by id rather than guessing a size).
std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type_id);
const GgmlTypeTraits& traits(GgmlType t);  // CHECKs that t is known
std::string_view type_name(GgmlType t);
std::optional<GgmlType> type_from_name(std::string_view name);

// Bytes of a row of n_elems elements; n_elems must be a multiple of the block size.
size_t row_bytes(GgmlType t, int64_t n_elems);

}  // namespace t9
