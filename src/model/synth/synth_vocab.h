// The tokenizer of synthetic models: a small, valid GPT-2 style byte-level BPE vocabulary (the 256
// byte tokens, a few dozen merges of common English pairs, ChatML specials) padded with unused
// [PAD<i>] tokens to the model's n_vocab, and a ChatML chat template — enough for `tempo9 run`,
// `tempo9 serve` and llama.cpp to load the file and round-trip text.
#pragma once

#include "core/result.h"
#include "gguf/gguf_writer.h"

namespace t9::synth {

// Tokens the vocabulary needs before padding; a model's n_vocab must be at least this.
int min_vocab_size();

// Writes tokenizer.ggml.* (model "gpt2", pre "qwen2", tokens, token_type, merges, special ids)
// and tokenizer.chat_template. Errors when n_vocab < min_vocab_size().
Status add_tokenizer_metadata(gguf::GgufWriter& w, int n_vocab);

}  // namespace t9::synth
