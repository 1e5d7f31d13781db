#include "server/prompt_builder.h"

namespace t9::server {

Result<std::vector<engine::TokenId>> tokenize_prompt(const ServerContext& ctx,
                                                     const std::string& text) {
  auto ids = ctx.tokenizer->encode_prompt(text);
  if (!ids.ok()) return error("prompt: {}", ids.message());
  return std::move(ids).value();
}

Result<std::string> render_chat(const ServerContext& ctx, const ChatInput& in) {
  if (!ctx.chat_template)
    return error("messages: the model has no chat template; use the completions endpoint");
  chat::ChatRequest req;
  req.messages = in.messages;
  req.tools = in.tools;
  req.add_generation_prompt = in.add_generation_prompt;
  req.kwargs = in.kwargs;
  auto text = ctx.chat_template->apply(req);
  if (!text.ok()) return error("messages: {}", text.message());
  return std::move(text).value();
}

namespace {

// Qwen3-style templates end the generation prompt inside "<think>\n": the output then starts in
// reasoning and only closes it.
bool prompt_opens_reasoning(const std::string& prompt) {
  size_t end = prompt.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return false;
  static const std::string kOpen = "<think>";
  return end + 1 >= kOpen.size() &&
         prompt.compare(end + 1 - kOpen.size(), kOpen.size(), kOpen) == 0;
}

}  // namespace

Result<GenerationSpec> chat_generation_spec(const ServerContext& ctx, const ChatInput& in) {
  T9_ASSIGN_OR_RETURN(std::string text, render_chat(ctx, in));
  GenerationSpec spec;
  T9_ASSIGN_OR_RETURN(spec.prompt, tokenize_prompt(ctx, text));
  spec.parse_chat = true;
  const bool has_tools = in.tools.is_array() && !in.tools.empty();
  spec.parser.tool_dialect = has_tools ? ctx.tool_dialect : "none";
  spec.parser.reasoning.enabled = true;
  spec.parser.reasoning.starts_in_reasoning = prompt_opens_reasoning(text);
  if (has_tools) {
    auto tools = chat::ToolSet::from_json(nlohmann::json::parse(in.tools.dump()));
    if (!tools.ok()) return error("{}", tools.message());
    spec.tools = std::make_shared<const chat::ToolSet>(std::move(tools).value());
    const bool lazy = !in.tool_call_required;
    // A required call the server cannot enforce (the template has no tool-call format it
    // knows) is refused, rather than answered in prose the client did not ask for.
    if (in.tool_call_required &&
        !grammar::tool_call_grammar_supports(spec.parser.tool_dialect, /*lazy=*/false))
      return error(
          "tool_choice: this model's chat template has no tool-call format the server can "
          "enforce (tool dialect '{}'); use tool_choice auto or none",
          spec.parser.tool_dialect);
    if ((in.tool_call_required || ctx.config.tool_grammar) &&
        grammar::tool_call_grammar_supports(spec.parser.tool_dialect, lazy)) {
      spec.format.kind = OutputFormat::Kind::kToolCall;
      spec.format.schema = in.tools;
      spec.format.tool_call = {spec.parser.tool_dialect, in.parallel_tool_calls, lazy};
    }
  }
  return spec;
}

}  // namespace t9::server
