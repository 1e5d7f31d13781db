// The one table of supported architectures: general.architecture -> builder.
#include <array>
#include <utility>

#include "model/arch/arch.h"

namespace t9::model {
namespace {

constexpr std::array<std::pair<std::string_view, ArchBuilder>, 8> kArchs{{
    {"llama", &build_llama},         {"qwen2", &build_qwen2},
    {"qwen3", &build_qwen3},         {"gemma3", &build_gemma3},
    {"qwen3moe", &build_qwen3moe},   {"qwen3next", &build_qwen3next},
    {"qwen35", &build_qwen35},       {"qwen35moe", &build_qwen35moe},
}};

}  // namespace

std::vector<LayerSpec> uniform_layers(const HParams& hp) {
  LayerSpec l;
  l.sliding_window = 0;
  l.rope_freq_base = hp.rope_freq_base;
  l.rope_freq_scale = hp.rope_freq_scale;
  return std::vector<LayerSpec>(static_cast<size_t>(hp.n_layer_main()), l);
}

Result<ArchSpec> build_arch(const HParams& hp) {
  for (const auto& [name, builder] : kArchs)
    if (name == hp.arch) {
      T9_ASSIGN_OR_RETURN(ArchSpec s, builder(hp));
      // Attention layers get consecutive KV pool layers; recurrent ones none.
      s.n_kv_layers = 0;
      for (LayerSpec& l : s.layers) l.kv_layer = l.recurrent ? -1 : s.n_kv_layers++;
      return s;
    }
  std::string names;
  for (const auto& [name, builder] : kArchs)
    names += (names.empty() ? "" : ", ") + std::string(name);
  return error("general.architecture '{}' is not supported (supported: {})", hp.arch, names);
}

std::vector<std::string_view> supported_archs() {
  std::vector<std::string_view> out;
  for (const auto& [name, builder] : kArchs) out.push_back(name);
  return out;
}

}  // namespace t9::model
