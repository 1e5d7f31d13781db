// `tempo9 template (--model FILE.gguf | --template FILE.jinja) --messages FILE.json
// [--tools FILE.json] [--no-generation-prompt] [--kwargs JSON] [--repeat N]`: prints exactly the
// prompt the chat template renders (no trailing newline added), as transformers'
// apply_chat_template(tokenize=False) would. --repeat N renders N times and reports the mean
// render time on stderr (for measuring, not for tests).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "apps/command.h"
#include "chat/chat_template.h"
#include "gguf/gguf_file.h"

namespace t9::apps {
namespace {

struct Options {
  std::string model, template_file, messages_file, tools_file, kwargs = "{}";
  bool no_generation_prompt = false;
  int repeat = 0;
};

Result<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return error("{}: cannot open", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Result<chat::Json> read_json(const std::string& path) {
  T9_ASSIGN_OR_RETURN(std::string text, read_file(path));
  auto j = chat::Json::parse(text, nullptr, false);
  if (j.is_discarded()) return error("{}: not valid JSON", path);
  return j;
}

// The token string for the id stored under `key`, or "" when absent or out of range.
std::string token_for(const gguf::GgufFile& f, const char* key) {
  auto id = f.get<uint32_t>(key);
  const gguf::Value* tokens = f.find("tokenizer.ggml.tokens");
  if (!id.ok() || !tokens || tokens->type != gguf::ValueType::ARRAY) return "";
  const auto& items = std::get<gguf::Array>(tokens->v).items;
  if (*id >= items.size()) return "";
  const auto* s = std::get_if<std::string>(&items[*id].v);
  return s ? *s : "";
}

Result<chat::ChatTemplate> load_template(const Options& o) {
  if (!o.template_file.empty()) {
    T9_ASSIGN_OR_RETURN(std::string src, read_file(o.template_file));
    return chat::ChatTemplate::create(src);
  }
  T9_ASSIGN_OR_RETURN(gguf::GgufFile f, gguf::GgufFile::open(o.model));
  auto src = f.get<std::string>("tokenizer.chat_template");
  if (!src.ok()) return error("{}: no tokenizer.chat_template in this model", o.model);
  chat::SpecialTokens tokens{token_for(f, "tokenizer.ggml.bos_token_id"),
                             token_for(f, "tokenizer.ggml.eos_token_id"),
                             token_for(f, "tokenizer.ggml.unknown_token_id"),
                             token_for(f, "tokenizer.ggml.padding_token_id")};
  return chat::ChatTemplate::create(*src, tokens);
}

Result<std::string> run(const Options& o) {
  if (o.model.empty() == o.template_file.empty())
    return error("give exactly one of --model and --template");
  T9_ASSIGN_OR_RETURN(chat::ChatTemplate tmpl, load_template(o));
  chat::ChatRequest req;
  T9_ASSIGN_OR_RETURN(chat::Json msgs, read_json(o.messages_file));
  // Either a messages array, or {"messages": [...], "tools": [...]}.
  if (msgs.is_object()) {
    if (msgs.contains("tools")) req.tools = msgs["tools"];
    msgs = msgs.value("messages", chat::Json::array());
  }
  req.messages = std::move(msgs);
  if (!o.tools_file.empty()) {
    T9_ASSIGN_OR_RETURN(req.tools, read_json(o.tools_file));
  }
  req.add_generation_prompt = !o.no_generation_prompt;
  req.kwargs = chat::Json::parse(o.kwargs, nullptr, false);
  if (req.kwargs.is_discarded() || !req.kwargs.is_object())
    return error("--kwargs: expected a JSON object");
  if (o.repeat > 0) {
    auto t0 = std::chrono::steady_clock::now();
    size_t bytes = 0;
    for (int i = 0; i < o.repeat; ++i) {
      T9_ASSIGN_OR_RETURN(std::string s, tmpl.apply(req));
      bytes = s.size();
    }
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "rendered %zu bytes, %d renders, mean %.1f us per render\n", bytes,
                 o.repeat, us / o.repeat);
  }
  return tmpl.apply(req);
}

const bool registered = register_command(Command{
    "template", "Render a chat template (from a GGUF or a .jinja file) over messages",
    [](CLI::App& sub) -> std::function<int()> {
      auto o = std::make_shared<Options>();
      auto* model =
          sub.add_option("--model", o->model, "GGUF file whose tokenizer.chat_template to use");
      auto* tmpl = sub.add_option("--template", o->template_file, "Jinja template file");
      model->excludes(tmpl);
      sub.add_option("--messages", o->messages_file, "JSON file: messages array")->required();
      sub.add_option("--tools", o->tools_file, "JSON file: tools array (OpenAI function format)");
      sub.add_flag("--no-generation-prompt", o->no_generation_prompt,
                   "Do not append the assistant generation prompt");
      sub.add_option("--kwargs", o->kwargs, "Extra template variables as a JSON object");
      sub.add_option("--repeat", o->repeat, "Render N times and print the mean time on stderr");
      return [o] {
        auto r = run(*o);
        if (!r.ok()) {
          std::fprintf(stderr, "error: %s\n", r.message().c_str());
          return 1;
        }
        std::fwrite(r->data(), 1, r->size(), stdout);
        return 0;
      };
    }});

}  // namespace
}  // namespace t9::apps
