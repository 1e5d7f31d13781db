#include "chat/tool_calls/dialects.h"

#include <fmt/format.h>

#include "chat/tool_calls/hermes_dialect.h"
#include "chat/tool_calls/llama3_dialect.h"
#include "chat/tool_calls/mistral_dialect.h"
#include "chat/tool_calls/qwen_xml_dialect.h"

namespace t9::chat {
namespace {

// No tool-call markup: every byte is content.
class NoToolCalls final : public ToolCallDialect {
 public:
  std::string_view name() const override { return "none"; }
  std::span<const std::string_view> triggers() const override { return {}; }
  void begin(std::string_view /*trigger*/) override {}
  MarkupStep step(std::string_view /*text*/, bool /*final*/, CallSink& /*sink*/) override {
    return MarkupStep::reject(1);  // unreachable: there are no triggers
  }
};

struct DialectEntry {
  std::string_view name;
  std::unique_ptr<ToolCallDialect> (*make)();
};

template <typename T>
std::unique_ptr<ToolCallDialect> make() {
  return std::make_unique<T>();
}

constexpr DialectEntry kDialects[] = {
    {"none", make<NoToolCalls>},          {"hermes", make<HermesDialect>},
    {"qwen_xml", make<QwenXmlDialect>},   {"mistral", make<MistralDialect>},
    {"llama3_json", make<Llama3Dialect>},
};

std::string mistral_call_id(std::size_t /*index*/) {
  return random_alnum(9);
}

}  // namespace

Result<std::unique_ptr<ToolCallDialect>> make_tool_call_dialect(std::string_view name) {
  for (const auto& d : kDialects) {
    if (d.name == name) return d.make();
  }
  return error("tool-call dialect '{}': unknown (known: {})", name,
               fmt::join(tool_call_dialect_names(), ", "));
}

CallIdFn default_call_id_fn(std::string_view dialect) {
  if (dialect == "mistral") return mistral_call_id;
  return random_call_id;
}

std::string_view detect_tool_call_dialect(std::string_view chat_template) {
  const auto has = [&](std::string_view s) {
    return chat_template.find(s) != std::string_view::npos;
  };
  if (has("<function=") && has("<parameter=")) return "qwen_xml";
  if (has("<tool_call>")) return "hermes";
  if (has("[TOOL_CALLS]")) return "mistral";
  if (has("<|python_tag|>") || (has("<|start_header_id|>") && has("\"parameters\""))) {
    return "llama3_json";
  }
  return "none";
}

std::vector<std::string_view> tool_call_dialect_names() {
  std::vector<std::string_view> names;
  for (const auto& d : kDialects) names.push_back(d.name);
  return names;
}

}  // namespace t9::chat
