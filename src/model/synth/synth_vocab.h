// The tokenizer of synthetic models: a small, valid GPT-2 style byte-level BPE vocabulary (the 256
// byte tokens, a few dozen merges of common English pairs, ChatML specials) padded with [PAD<i>]
// tokens to the model's n_vocab, and a ChatML chat template — enough for `tempo9 run`,
// `tempo9 serve` and llama.cpp to load the file and round-trip text. A real tokenizer can take
// its place (synth_vocab_json.h); both are written by write_tokenizer_metadata, so padding and
// chat template are the same whichever vocabulary a file carries.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "gguf/gguf_writer.h"

namespace t9::synth {

// A byte-level BPE vocabulary before padding, as the tokenizer.ggml.* keys store it.
struct SynthVocab {
  std::vector<std::string> tokens;  // id order; "" for an id the vocabulary leaves undefined
  std::vector<int32_t> types;       // llama.cpp token types (1 normal, 3 control, 4 user-defined)
  std::vector<std::string> merges;  // "left right", in rank order
  uint32_t bos = 0, eos = 0, pad = 0;
};

// Tokens the synthetic vocabulary needs before padding; a model's n_vocab must be at least this.
int min_vocab_size();

// Writes tokenizer.ggml.* (model "gpt2", pre "qwen2", tokens, token_type, merges, special ids)
// and tokenizer.chat_template for the synthetic vocabulary. Errors when n_vocab <
// min_vocab_size().
Status add_tokenizer_metadata(gguf::GgufWriter& w, int n_vocab);

// Writes `v` the same way: undefined ids and ids up to n_vocab become normal "[PAD<i>]" tokens,
// bos is not added, the chat template is ChatML. Errors when `v` has more ids than n_vocab,
// naming `source` (where the vocabulary came from) and both numbers.
Status write_tokenizer_metadata(gguf::GgufWriter& w, SynthVocab v, int n_vocab,
                                std::string_view source);

}  // namespace t9::synth
