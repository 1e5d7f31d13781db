#include "model/synth/synth_vocab.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

namespace t9::synth {
namespace {

using gguf::Value;
using gguf::ValueType;

// llama.cpp token types.
constexpr int32_t kNormal = 1, kControl = 3;

// Merges as byte-level strings ("Ġ" is the space byte); each merge's result becomes a token, and
// later merges may use earlier results (rank = position).
constexpr const char* kMerges[] = {
    "Ġ t",  "h e", "i n",  "e r", "a n", "o n", "Ġ a",  "r e",  "Ġ s",   "e n",  "Ġt he", "Ġ w",
    "o r",  "a t", "Ġ c",  "i s", "e s", "i t", "Ġ o",  "Ġ b",  "a l",   "Ġ f",  "Ġ p",   "Ġ m",
    "in g", "e d", "Ġ in", "o u", "Ġ d", "l e", "Ġo f", "Ġa n", "Ġan d", "Ġt o", "Ġ h",   "s t",
    "i c",  "Ġ l", "a r",  "Ġ i", "Ġ e", "l l", "Ġ 1",  "Ġ 2",  "Ġ =",   "Ġ (",  "Ġ {",   "Ċ Ċ",
};

constexpr const char* kSpecials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};

// The ChatML template (as Qwen models use, without tools).
constexpr const char* kChatTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

// GPT-2's bytes_to_unicode: printable bytes map to themselves, the others to U+0100 onwards.
std::string byte_token(int b) {
  const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  int cp = b;
  if (!printable) {
    int n = 0;
    for (int x = 0; x < b; ++x) {
      const bool p = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255);
      if (!p) ++n;
    }
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

std::vector<std::string> base_tokens() {
  std::vector<std::string> t;
  for (int b = 0; b < 256; ++b) t.push_back(byte_token(b));
  for (const char* m : kMerges) {
    std::string s(m);
    s.erase(s.find(' '), 1);
    t.push_back(s);
  }
  return t;
}

Value str_array(const std::vector<std::string>& v) {
  std::vector<Value> items;
  items.reserve(v.size());
  for (const std::string& s : v) items.push_back(Value::str(s));
  return Value::array(ValueType::STRING, std::move(items));
}

}  // namespace

int min_vocab_size() {
  return static_cast<int>(base_tokens().size() + std::size(kSpecials));
}

Status add_tokenizer_metadata(gguf::GgufWriter& w, int n_vocab) {
  SynthVocab v;
  v.tokens = base_tokens();
  v.types.assign(v.tokens.size(), kNormal);
  const auto first_special = static_cast<uint32_t>(v.tokens.size());
  for (const char* s : kSpecials) {
    v.tokens.emplace_back(s);
    v.types.push_back(kControl);
  }
  v.merges.assign(std::begin(kMerges), std::end(kMerges));
  v.bos = first_special;      // <|endoftext|>, not added (as Qwen)
  v.eos = first_special + 2;  // <|im_end|>
  v.pad = first_special;
  return write_tokenizer_metadata(w, std::move(v), n_vocab, "the synthetic tokenizer");
}

Status write_tokenizer_metadata(gguf::GgufWriter& w, SynthVocab v, int n_vocab,
                                std::string_view source) {
  if (v.tokens.size() > static_cast<size_t>(std::max(n_vocab, 0)))
    return error("synth: n_vocab {} is below the {} token ids of {}", n_vocab, v.tokens.size(),
                 source);
  // The padding is most of a real-shape vocabulary (151k of Qwen3's 152k ids with the synthetic
  // tokenizer), so a random model mostly generates it: as normal tokens with visible text
  // ("[PAD123]", ASCII, valid byte-level BPE) the servers stream something for each one, and
  // benchmarks can time first tokens and gaps (unused tokens decode to nothing, so nothing was
  // streamed). Ids a real vocabulary leaves undefined get the same treatment.
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (!v.tokens[i].empty()) continue;
    v.tokens[i] = fmt::format("[PAD{}]", i);
    v.types[i] = kNormal;
  }
  for (int i = static_cast<int>(v.tokens.size()); i < n_vocab; ++i) {
    v.tokens.push_back(fmt::format("[PAD{}]", i));
    v.types.push_back(kNormal);
  }
  std::vector<Value> types;
  types.reserve(v.types.size());
  for (int32_t t : v.types) types.push_back(Value::i32(t));
  w.set("tokenizer.ggml.model", Value::str("gpt2"));
  w.set("tokenizer.ggml.pre", Value::str("qwen2"));
  w.set("tokenizer.ggml.tokens", str_array(v.tokens));
  w.set("tokenizer.ggml.token_type", Value::array(ValueType::INT32, std::move(types)));
  w.set("tokenizer.ggml.merges", str_array(v.merges));
  w.set("tokenizer.ggml.bos_token_id", Value::u32(v.bos));
  w.set("tokenizer.ggml.eos_token_id", Value::u32(v.eos));
  w.set("tokenizer.ggml.padding_token_id", Value::u32(v.pad));
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(false));
  w.set("tokenizer.chat_template", Value::str(kChatTemplate));
  return {};
}

}  // namespace t9::synth
