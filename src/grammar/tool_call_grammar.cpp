#include "grammar/tool_call_grammar.h"

#include <set>

#include "grammar/schema_compiler.h"

namespace t9::grammar {

namespace {

struct Tool {
  std::string name;
  const Json* parameters;  // a schema (object), or the empty object
};

Result<std::vector<Tool>> read_tools(const Json& tools) {
  static const Json kNoParameters = Json{{"type", "object"}};
  std::vector<Tool> out;
  if (!tools.is_array() || tools.empty())
    return error("tools: a tool call needs at least one tool");
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const Json* fn = t.is_object() && t.contains("function") ? &t["function"] : &t;
    if (!fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
      return error("tools[{}].function.name: is required", i);
    auto p = fn->find("parameters");
    out.push_back({(*fn)["name"].get<std::string>(),
                   p != fn->end() && p->is_object() ? &*p : &kNoParameters});
  }
  return out;
}

// {"name": "f", "<args_key>": ARGS} for each tool, as one rule of alternatives.
uint32_t json_calls(SchemaCompiler& c, const std::vector<Tool>& tools,
                    const std::string& args_key) {
  GrammarBuilder& b = c.builder();
  const auto R = GrammarBuilder::ref;
  const uint32_t ws = c.ws();
  std::vector<Alt> alts;
  for (const Tool& t : tools) {
    c.set_root(*t.parameters);
    const uint32_t args = c.value(*t.parameters, "tools." + t.name + ".parameters");
    Alt a{b.byte('{'), R(ws)};
    b.literal(a, "\"name\"");
    a.insert(a.end(), {R(ws), b.byte(':'), R(ws)});
    b.literal(a, Json(t.name).dump());
    a.insert(a.end(), {R(ws), b.byte(','), R(ws)});
    b.literal(a, Json(args_key).dump());
    a.insert(a.end(), {R(ws), b.byte(':'), R(ws), R(args), R(ws), b.byte('}')});
    alts.push_back(std::move(a));
  }
  return b.rule("call-json", std::move(alts));
}

// The strings of an enum (or const) of strings only; empty otherwise.
std::vector<std::string> string_choices(const Json& schema) {
  std::vector<std::string> out;
  if (!schema.is_object()) return out;
  if (auto c = schema.find("const"); c != schema.end()) {
    if (c->is_string()) out.push_back(c->get<std::string>());
    return out;
  }
  auto e = schema.find("enum");
  if (e == schema.end() || !e->is_array()) return out;
  for (const Json& v : *e) {
    if (!v.is_string()) return {};
    out.push_back(v.get<std::string>());
  }
  return out;
}

// <function=f>\n then each parameter as <parameter=p>\nVALUE\n</parameter>\n (declared order,
// optional ones may be left out), then </function>.
uint32_t xml_calls(SchemaCompiler& c, const std::vector<Tool>& tools) {
  GrammarBuilder& b = c.builder();
  const auto R = GrammarBuilder::ref;
  const uint32_t raw_text = b.text_until("raw-value", "\n</parameter>");
  std::vector<Alt> alts;
  for (const Tool& t : tools) {
    c.set_root(*t.parameters);
    Alt a = b.literal("<function=" + t.name + ">\n");
    std::set<std::string> required;
    if (auto r = t.parameters->find("required"); r != t.parameters->end() && r->is_array())
      for (const Json& n : *r)
        if (n.is_string()) required.insert(n.get<std::string>());
    if (auto props = t.parameters->find("properties");
        props != t.parameters->end() && props->is_object()) {
      for (auto p = props->begin(); p != props->end(); ++p) {
        const Json& schema = p.value();
        Alt param = b.literal("<parameter=" + p.key() + ">\n");
        if (const std::vector<std::string> words = string_choices(schema); !words.empty()) {
          std::vector<Alt> choices;  // written raw, as the template writes a string argument
          for (const std::string& w : words) choices.push_back(b.literal(w + "\n</parameter>\n"));
          param.push_back(R(b.rule("choice-" + p.key(), std::move(choices))));
        } else if (schema.is_object() && schema.contains("type") && schema["type"] == "string") {
          param.push_back(R(raw_text));  // ends with "\n</parameter>"
          param.push_back(b.byte('\n'));
        } else {
          param.push_back(
              R(c.value(schema, "tools." + t.name + ".parameters.properties." + p.key())));
          b.literal(param, "\n</parameter>\n");
        }
        const uint32_t rule = b.rule("param-" + p.key(), {std::move(param)});
        a.push_back(required.count(p.key()) ? R(rule)
                                            : R(b.optional("opt-" + p.key(), Alt{R(rule)})));
      }
    }
    b.literal(a, "</function>");
    alts.push_back(std::move(a));
  }
  return b.rule("function", std::move(alts));
}

}  // namespace

bool tool_call_grammar_supports(std::string_view dialect, bool lazy) {
  if (dialect == "hermes" || dialect == "qwen_xml") return true;
  return dialect == "llama3_json" && !lazy;  // its calls open with '{': no marker to wait for
}

Result<Grammar> tool_call_grammar(const Json& tools, const ToolCallFormat& format,
                                  const Preamble& preamble) {
  if (!tool_call_grammar_supports(format.dialect, format.lazy))
    return error("tool_choice: a {} tool call is not supported for the '{}' tool-call dialect",
                 format.lazy ? "lazily checked" : "required", format.dialect);
  T9_ASSIGN_OR_RETURN(std::vector<Tool> list, read_tools(tools));
  SchemaCompiler c(tools, /*lenient=*/true);
  GrammarBuilder& b = c.builder();
  const auto R = GrammarBuilder::ref;
  // A call is its opening marker and its rest: the lazy grammar's free text ends at the marker.
  std::string open, separator = "\n";
  uint32_t rest = 0;
  if (format.dialect == "hermes" || format.dialect == "qwen_xml") {
    open = "<tool_call>";
    Alt a = b.literal("\n");
    a.push_back(
        R(format.dialect == "hermes" ? json_calls(c, list, "arguments") : xml_calls(c, list)));
    b.literal(a, "\n</tool_call>");
    rest = b.rule("call-rest", {std::move(a)});
  } else {
    rest = json_calls(c, list, "parameters");
    separator = "; ";
  }
  Alt whole = b.literal(open);
  whole.push_back(R(rest));
  const uint32_t call = b.rule("call", {std::move(whole)});
  // The first call's rest, then (parallel) more whole calls.
  uint32_t after_open = rest;
  if (format.parallel) {
    Alt next = b.literal(separator);
    next.push_back(R(call));
    after_open =
        b.rule("calls",
               {Alt{R(rest), R(b.star("more-calls", R(b.rule("next-call", {std::move(next)}))))}});
  }
  uint32_t body = 0;
  if (format.lazy) {
    body = b.text_then("text", open, after_open);
  } else {
    Alt a = b.literal(open);
    a.push_back(R(after_open));
    body = b.rule("calls-required", {std::move(a)});
  }
  return std::move(c).finish(body, preamble);
}

}  // namespace t9::grammar
