#include "apps/chat_setup.h"

#include "backend/cpu/cpu_backend.h"
#ifdef TEMPO9_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace t9::apps {

Result<std::optional<chat::ChatTemplate>> load_chat_template(const gguf::GgufFile& file,
                                                             const tok::Tokenizer& tokenizer) {
  const std::string src = file.get_or<std::string>("tokenizer.chat_template", "");
  if (src.empty()) return std::optional<chat::ChatTemplate>();
  const auto& v = tokenizer.vocab();
  auto text_of = [&](tok::TokenId id) {
    return id >= 0 ? v.texts[static_cast<size_t>(id)] : std::string();
  };
  auto t = chat::ChatTemplate::create(
      src, {text_of(v.bos), text_of(v.eos), text_of(v.unk), text_of(v.pad)});
  if (!t.ok()) return error("{}: chat template: {}", file.name(), t.message());
  return std::optional<chat::ChatTemplate>(std::move(t).value());
}

std::vector<tok::TokenId> eog_token_ids(const tok::Tokenizer& tokenizer) {
  std::vector<tok::TokenId> ids;
  for (size_t id = 0; id < tokenizer.n_tokens(); ++id)
    if (tokenizer.is_eog(static_cast<tok::TokenId>(id)))
      ids.push_back(static_cast<tok::TokenId>(id));
  return ids;
}

Result<std::unique_ptr<Backend>> make_backend(const std::string& name, int threads,
                                              std::optional<CpuIsa> isa) {
  if (name == "cpu")
    return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(CpuBackendConfig{threads, isa}));
  if (name == "cuda") {
    if (isa) return error("--isa: the cuda backend has no CPU kernel set");
#ifdef TEMPO9_HAVE_CUDA
    if (cuda_device_count() == 0) return error("--backend cuda: no CUDA device found");
    return std::unique_ptr<Backend>(std::make_unique<CudaBackend>());
#else
    return error(
        "--backend cuda: this tempo9 was built without CUDA (configure with nvcc on "
        "PATH, -DTEMPO9_CUDA=ON)");
#endif
  }
  return error("--backend: unknown backend '{}' (cpu or cuda)", name);
}

}  // namespace t9::apps
