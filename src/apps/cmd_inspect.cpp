// `tempo9 inspect FILE [--json]`: what a GGUF file holds — architecture, size, parameter count,
// quant mix, the hyper-parameters a server cares about, tokenizer and chat template presence.
// A file that fails validation prints the reader's one-line message on stderr and exits 1.
#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/command.h"
#include "gguf/gguf_file.h"

namespace t9::apps {
namespace {

using gguf::GgufFile;
using gguf::Value;
using gguf::ValueType;
using nlohmann::json;

json value_to_json(const Value& v) {
  return std::visit(
      [](const auto& x) -> json {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, gguf::Array>) {
          json a = json::array();
          for (const auto& item : x.items) a.push_back(value_to_json(item));
          return a;
        } else {
          return json(x);
        }
      },
      v.v);
}

// A metadata value as JSON, or null when absent.
json meta(const GgufFile& f, const std::string& key) {
  const Value* v = f.find(key);
  return v ? value_to_json(*v) : json(nullptr);
}

json summarize(const GgufFile& f) {
  const std::string arch = f.get_or<std::string>("general.architecture", "");
  json j;
  j["file"] = f.name();
  j["file_size"] = f.file_size();
  j["gguf_version"] = f.version();
  j["alignment"] = f.alignment();
  j["n_metadata"] = f.metadata().size();
  j["architecture"] = arch.empty() ? json(nullptr) : json(arch);
  j["name"] = meta(f, "general.name");
  int64_t n_params = 0;
  std::map<std::string, std::pair<uint64_t, uint64_t>> mix;  // type -> (tensors, bytes)
  for (const auto& t : f.tensors()) {
    n_params += t.n_elements;
    auto& [n, bytes] = mix[std::string(type_name(t.type))];
    n += 1;
    bytes += t.n_bytes;
  }
  j["n_tensors"] = f.tensors().size();
  j["n_params"] = n_params;
  json q = json::object();
  for (const auto& [type, nb] : mix) q[type] = {{"n_tensors", nb.first}, {"n_bytes", nb.second}};
  j["quant_mix"] = q;
  j["context_length"] = meta(f, arch + ".context_length");
  j["embedding_length"] = meta(f, arch + ".embedding_length");
  j["block_count"] = meta(f, arch + ".block_count");
  j["head_count"] = meta(f, arch + ".attention.head_count");
  j["head_count_kv"] = meta(f, arch + ".attention.head_count_kv");
  const Value* tokens = f.find("tokenizer.ggml.tokens");
  const bool tokens_ok = tokens && tokens->type == ValueType::ARRAY;
  j["tokenizer"] = {{"model", meta(f, "tokenizer.ggml.model")},
                    {"pre", meta(f, "tokenizer.ggml.pre")},
                    {"vocab_size", tokens_ok ? json(std::get<gguf::Array>(tokens->v).items.size())
                                             : json(nullptr)}};
  j["has_chat_template"] = f.find("tokenizer.chat_template") != nullptr;
  return j;
}

std::string human_bytes(uint64_t n) {
  if (n >= (1ull << 30)) return fmt::format("{:.2f} GiB", n / double(1ull << 30));
  if (n >= (1ull << 20)) return fmt::format("{:.2f} MiB", n / double(1ull << 20));
  if (n >= (1ull << 10)) return fmt::format("{:.2f} KiB", n / double(1ull << 10));
  return fmt::format("{} B", n);
}

std::string text(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void print_text(const json& j) {
  const uint64_t size = j["file_size"];
  const int64_t params = j["n_params"];
  fmt::print("file:              {}\n", text(j["file"]));
  fmt::print("file size:         {} ({} bytes)\n", human_bytes(size), size);
  fmt::print("gguf:              version {}, alignment {}, {} metadata keys\n",
             text(j["gguf_version"]), text(j["alignment"]), text(j["n_metadata"]));
  fmt::print("architecture:      {}\n", text(j["architecture"]));
  fmt::print("name:              {}\n", text(j["name"]));
  fmt::print("parameters:        {} ({:.3f} B)\n", params, params / 1e9);
  fmt::print("tensors:           {}\n", text(j["n_tensors"]));
  for (const auto& [type, v] : j["quant_mix"].items())
    fmt::print("  {:<8} {:>5} tensors  {:>12}\n", type, text(v["n_tensors"]),
               human_bytes(v["n_bytes"].get<uint64_t>()));
  fmt::print("context length:    {}\n", text(j["context_length"]));
  fmt::print("embedding length:  {}\n", text(j["embedding_length"]));
  fmt::print("block count:       {}\n", text(j["block_count"]));
  fmt::print("heads (q / kv):    {} / {}\n", text(j["head_count"]), text(j["head_count_kv"]));
  const json& tok = j["tokenizer"];
  fmt::print("tokenizer:         {} (pre {}), vocab {}\n", text(tok["model"]), text(tok["pre"]),
             text(tok["vocab_size"]));
  fmt::print("chat template:     {}\n", j["has_chat_template"].get<bool>() ? "yes" : "no");
}

struct InspectOptions {
  std::string path;
  bool json = false;
};

const bool registered = register_command(Command{
    "inspect", "Show what a GGUF model file holds (validates it first)",
    [](CLI::App& sub) -> std::function<int()> {
      auto opts = std::make_shared<InspectOptions>();
      sub.add_option("file", opts->path, "GGUF file")->required();
      sub.add_flag("--json", opts->json, "Print one JSON object");
      return [opts] {
        auto f = GgufFile::open(opts->path);
        if (!f.ok()) {
          std::fprintf(stderr, "%s\n", f.message().c_str());
          return 1;
        }
        const json j = summarize(*f);
        // Strings from the file may be invalid UTF-8: replace, never throw.
        if (opts->json)
          std::printf("%s\n", j.dump(2, ' ', false, json::error_handler_t::replace).c_str());
        else
          print_text(j);
        return 0;
      };
    }});

}  // namespace
}  // namespace t9::apps
