// A real tokenizer in synthetic models (`tempo9 synth --tokenizer tokenizer.json`): a Hugging Face
// byte-level BPE tokenizer, such as Qwen3's, in place of the synthetic vocabulary. The synthetic
// vocabulary cuts English into ~3x as many tokens as a real one, which skews what benchmarks on
// synthetic models measure (prompt lengths, prefix-cache hits, TTFT); a real vocabulary does not.
#pragma once

#include <string>

#include "core/result.h"
#include "gguf/gguf_writer.h"
#include "model/synth/synth_vocab.h"

namespace t9::synth {

// The file as parsed by the tokenizer.json reader (tok::vocab_from_tokenizer_json_file, so
// exactly what our tokenizer accepts), in the form the tokenizer.ggml.* keys take: vocab entries
// normal, added tokens control ("special": true) or user-defined, merges as "a b", eos
// <|im_end|>, bos and pad <|endoftext|> (else the ids tokenizer_config.json names). Errors name
// the file: unreadable, not byte-level BPE, a pre-tokenizer other than Qwen2's (the only one
// the GGUF says), or no eos.
Result<SynthVocab> synth_vocab_from_tokenizer_json(const std::string& path);

// Reads `path` as above and writes it with write_tokenizer_metadata (padded to n_vocab, ChatML).
Status add_tokenizer_json_metadata(gguf::GgufWriter& w, const std::string& path, int n_vocab);

}  // namespace t9::synth
