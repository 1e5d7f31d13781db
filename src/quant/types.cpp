#include "quant/types.h"

#include <array>

#include "core/check.h"

namespace t9 {
namespace {

constexpr std::array kTraits = {
    GgmlTypeTraits{GgmlType::F32, "F32", 1, 4, false},
    GgmlTypeTraits{GgmlType::F16, "F16", 1, 2, false},
    GgmlTypeTraits{GgmlType::Q4_0, "Q4_0", 32, 18, true},
    GgmlTypeTraits{GgmlType::Q4_1, "Q4_1", 32, 20, true},
    GgmlTypeTraits{GgmlType::Q5_0, "Q5_0", 32, 22, true},
    GgmlTypeTraits{GgmlType::Q5_1, "Q5_1", 32, 24, true},
    GgmlTypeTraits{GgmlType::Q8_0, "Q8_0", 32, 34, true},
    GgmlTypeTraits{GgmlType::Q8_1, "Q8_1", 32, 36, true},
    GgmlTypeTraits{GgmlType::Q2_K, "Q2_K", 256, 84, true},
    GgmlTypeTraits{GgmlType::Q3_K, "Q3_K", 256, 110, true},
    GgmlTypeTraits{GgmlType::Q4_K, "Q4_K", 256, 144, true},
    GgmlTypeTraits{GgmlType::Q5_K, "Q5_K", 256, 176, true},
    GgmlTypeTraits{GgmlType::Q6_K, "Q6_K", 256, 210, true},
    GgmlTypeTraits{GgmlType::Q8_K, "Q8_K", 256, 292, true},
    GgmlTypeTraits{GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66, true},
    GgmlTypeTraits{GgmlType::IQ2_XS, "IQ2_XS", 256, 74, true},
    GgmlTypeTraits{GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98, true},
    GgmlTypeTraits{GgmlType::IQ1_S, "IQ1_S", 256, 50, true},
    GgmlTypeTraits{GgmlType::IQ4_NL, "IQ4_NL", 32, 18, true},
    GgmlTypeTraits{GgmlType::IQ3_S, "IQ3_S", 256, 110, true},
    GgmlTypeTraits{GgmlType::IQ2_S, "IQ2_S", 256, 82, true},
    GgmlTypeTraits{GgmlType::IQ4_XS, "IQ4_XS", 256, 136, true},
    GgmlTypeTraits{GgmlType::I8, "I8", 1, 1, false},
    GgmlTypeTraits{GgmlType::I16, "I16", 1, 2, false},
    GgmlTypeTraits{GgmlType::I32, "I32", 1, 4, false},
    GgmlTypeTraits{GgmlType::I64, "I64", 1, 8, false},
    GgmlTypeTraits{GgmlType::F64, "F64", 1, 8, false},
    GgmlTypeTraits{GgmlType::IQ1_M, "IQ1_M", 256, 56, true},
    GgmlTypeTraits{GgmlType::BF16, "BF16", 1, 2, false},
    GgmlTypeTraits{GgmlType::TQ1_0, "TQ1_0", 256, 54, true},
    GgmlTypeTraits{GgmlType::TQ2_0, "TQ2_0", 256, 66, true},
    GgmlTypeTraits{GgmlType::MXFP4, "MXFP4", 32, 17, true},
};

}  // namespace

std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type_id) {
  for (const auto& t : kTraits)
    if (static_cast<uint32_t>(t.type) == type_id) return t;
  return std::nullopt;
}

const GgmlTypeTraits& traits(GgmlType t) {
  for (const auto& tr : kTraits)
    if (tr.type == t) return tr;
  T9_CHECK(false, "unknown ggml type id {}", static_cast<uint32_t>(t));
  __builtin_unreachable();
}

std::string_view type_name(GgmlType t) { return traits(t).name; }

std::optional<GgmlType> type_from_name(std::string_view name) {
  for (const auto& t : kTraits)
    if (t.name == name) return t.type;
  return std::nullopt;
}

size_t row_bytes(GgmlType t, int64_t n_elems) {
  const auto& tr = traits(t);
  T9_CHECK(n_elems % tr.block_elems == 0, "{} elements is not a multiple of {}'s block of {}",
           n_elems, tr.name, tr.block_elems);
  return static_cast<size_t>(n_elems / tr.block_elems) * tr.block_bytes;
}

}  // namespace t9
