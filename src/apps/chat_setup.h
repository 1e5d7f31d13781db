// What `tempo9 run` and `tempo9 serve` both need beside the weights: the model's chat template
// (from tokenizer.chat_template, with the vocab's special-token texts) and the end-of-generation
// token ids that stop every request.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"

#include "chat/chat_template.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace t9::apps {

// nullopt when the file has no template (base models); an Error when it has one we cannot parse.
Result<std::optional<chat::ChatTemplate>> load_chat_template(const gguf::GgufFile& file,
                                                             const tok::Tokenizer& tokenizer);

std::vector<tok::TokenId> eog_token_ids(const tok::Tokenizer& tokenizer);

// The compute backend named by --backend: "cpu" (`threads` workers, 0 = all cores; `isa` its
// kernel set, unset: TEMPO9_CPU_ISA, else the best) or "cuda" (device 0: weights, KV pool and
// activations in GPU memory). An error names the reason when the name is unknown, the binary was
// built without CUDA, no CUDA device is visible, or an ISA is given for cuda.
Result<std::unique_ptr<Backend>> make_backend(const std::string& name, int threads,
                                              std::optional<CpuIsa> isa = std::nullopt);

}  // namespace t9::apps
