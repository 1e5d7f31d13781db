#include "server/api/responses_input.h"

#include "server/api/common.h"

namespace t9::server::api {
namespace {

// A message item's content: a string, or an array of text parts (input_text, output_text, text;
// a refusal's text too). Images and files are refused with the part's path.
std::optional<std::string> content_text(FieldReader& r, const Json& item, const std::string& path) {
  auto it = item.find("content");
  const std::string cp = FieldReader::join(path, "content");
  if (it == item.end() || it->is_null()) {
    r.fail(cp, "is required");
    return std::nullopt;
  }
  return content_parts_text(r, *it, cp, {"input_text", "output_text", "text"}, true);
}

// A reasoning item's text: its reasoning_text content, else its summary's texts.
std::string reasoning_text(const Json& item) {
  std::string text;
  for (const char* key : {"content", "summary"}) {
    auto it = item.find(key);
    if (it == item.end() || !it->is_array()) continue;
    for (const Json& p : *it)
      if (p.is_object() && p.contains("text") && p["text"].is_string())
        text += p["text"].get<std::string>();
    if (!text.empty()) break;
  }
  return text;
}

// The assistant message being built from consecutive assistant items (text, reasoning, calls).
struct AssistantTurn {
  bool open = false;
  std::string content, reasoning;
  Json tool_calls = Json::array();
  void flush(Json& out) {
    if (!open) return;
    Json msg = {{"role", "assistant"}, {"content", content}};
    if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
    if (!tool_calls.empty()) msg["tool_calls"] = tool_calls;
    out.push_back(std::move(msg));
    *this = AssistantTurn{};
  }
};

void read_tools(FieldReader& r, const Json& body, ResponsesRequest& q) {
  const Json* tools = r.array(body, "", "tools");
  if (!r.ok() || !tools) return;
  q.tools = *tools;
  Json chat_tools = Json::array();
  for (size_t i = 0; i < tools->size() && r.ok(); ++i) {
    const Json& t = (*tools)[i];
    const std::string tp = FieldReader::index("tools", i);
    if (!t.is_object()) return r.fail(tp, "expected a tool object");
    const std::string type = r.str(t, tp, "type").value_or("");
    if (!r.ok()) return;
    if (type != "function")
      return r.fail(FieldReader::join(tp, "type"),
                    "tool type '" + type + "' is not supported (function tools only)");
    auto name = r.str(t, tp, "name");
    if (!name) r.require(t, tp, "name");
    if (!r.ok()) return;
    auto description = r.str(t, tp, "description");
    const Json* params = r.object(t, tp, "parameters");
    if (!r.ok()) return;
    chat_tools.push_back(
        {{"type", "function"},
         {"function",
          {{"name", *name},
           {"description", description.value_or("")},
           {"parameters",
            params ? *params : Json{{"type", "object"}, {"properties", Json::object()}}}}}});
  }
  if (!r.ok() || chat_tools.empty()) return;
  // tool_choice: "none" | "auto" | "required" | {"type": "function", "name": ...}.
  auto it = body.find("tool_choice");
  if (it != body.end() && !it->is_null()) {
    q.tool_choice = *it;
    if (it->is_string()) {
      const std::string c = it->get<std::string>();
      if (c == "none") return;
      if (c != "auto" && c != "required")
        return r.fail("tool_choice", "must be none, auto, required or {\"type\":\"function\",...}");
      q.chat.tool_call_required = c == "required";
    } else {
      const Json type = it->is_object() ? it->value("type", Json()) : Json();
      const Json fn = it->is_object() ? it->value("name", Json()) : Json();
      const std::string name = type == "function" && fn.is_string() ? fn.get<std::string>() : "";
      if (name.empty())
        return r.fail("tool_choice",
                      "must be none, auto, required or {\"type\":\"function\",\"name\":...}");
      Json only = Json::array();
      for (const Json& t : chat_tools)
        if (t["function"]["name"] == name) only.push_back(t);
      if (only.empty()) return r.fail("tool_choice.name", "names no tool in tools");
      chat_tools = only;
      q.chat.tool_call_required = true;
    }
  }
  q.chat.tools = chat_tools;
}

// text.format: {"type": "text" | "json_object" | "json_schema", "name", "schema", "strict"}.
void read_text_format(FieldReader& r, const Json& body, ResponsesRequest& q) {
  const Json* text = r.object(body, "", "text");
  if (!r.ok() || !text) return;
  q.text = *text;
  const Json* f = r.object(*text, "text", "format");
  if (!r.ok() || !f) return;
  const auto type = r.str(*f, "text.format", "type");
  if (!r.ok()) return;
  if (!type) return r.fail("text.format.type", "is required: text, json_object or json_schema");
  if (*type == "text") return;
  if (*type == "json_object") {
    q.format.kind = OutputFormat::Kind::kJsonObject;
    return;
  }
  if (*type != "json_schema")
    return r.fail("text.format.type", "must be text, json_object or json_schema");
  auto it = f->find("schema");
  if (it == f->end() || it->is_null()) return r.fail("text.format.schema", "is required");
  if (!it->is_object() && !it->is_boolean())
    return r.fail("text.format.schema", "must be a JSON schema object");
  q.format = {OutputFormat::Kind::kJsonSchema, *it, "text.format.schema", {}};
}

}  // namespace

void read_input_items(FieldReader& r, const Json& input, const std::string& path, Json& out) {
  if (input.is_string()) {
    out.push_back({{"role", "user"}, {"content", input.get<std::string>()}});
    return;
  }
  if (!input.is_array()) return r.fail(path, "expected a string or an array of input items");
  AssistantTurn turn;
  for (size_t i = 0; i < input.size() && r.ok(); ++i) {
    const Json& item = input[i];
    const std::string ip = FieldReader::index(path, i);
    if (!item.is_object()) return r.fail(ip, "expected an input item object");
    const std::string type =
        r.str(item, ip, "type").value_or(item.contains("role") ? "message" : "");
    if (!r.ok()) return;
    if (type == "message") {
      auto role = r.str(item, ip, "role");
      if (!role) r.require(item, ip, "role");
      if (!r.ok()) return;
      auto text = content_text(r, item, ip);
      if (!r.ok()) return;
      if (*role == "assistant") {
        if (!turn.tool_calls.empty()) turn.flush(out);  // text after calls: a new turn
        turn.open = true;
        turn.content += *text;
        continue;
      }
      turn.flush(out);
      if (*role == "developer" || *role == "system") {
        out.push_back({{"role", "system"}, {"content", *text}});
      } else if (*role == "user") {
        out.push_back({{"role", "user"}, {"content", *text}});
      } else {
        return r.fail(FieldReader::join(ip, "role"),
                      "must be user, assistant, system or developer");
      }
    } else if (type == "reasoning") {
      if (!turn.tool_calls.empty() || !turn.content.empty()) turn.flush(out);
      turn.open = true;
      turn.reasoning += reasoning_text(item);
    } else if (type == "function_call") {
      auto call_id = r.str(item, ip, "call_id");
      auto name = r.str(item, ip, "name");
      auto args = r.str(item, ip, "arguments");
      if (!call_id) r.require(item, ip, "call_id");
      if (!name) r.require(item, ip, "name");
      if (!r.ok()) return;
      turn.open = true;
      turn.tool_calls.push_back(
          {{"id", *call_id},
           {"type", "function"},
           {"function",
            {{"name", *name}, {"arguments", arguments_object(Json(args.value_or("{}")))}}}});
    } else if (type == "function_call_output") {
      turn.flush(out);
      auto call_id = r.str(item, ip, "call_id");
      if (!call_id) r.require(item, ip, "call_id");
      if (!r.ok()) return;
      auto it = item.find("output");
      std::string output;
      if (it != item.end() && it->is_array()) {
        Json wrapped = {{"content", *it}};
        auto t = content_text(r, wrapped, FieldReader::join(ip, "output"));
        if (!r.ok()) return;
        output = *t;
      } else if (it != item.end() && it->is_string()) {
        output = it->get<std::string>();
      } else {
        return r.fail(FieldReader::join(ip, "output"),
                      "is required: a string or an array of text parts");
      }
      out.push_back({{"role", "tool"}, {"tool_call_id", *call_id}, {"content", output}});
    } else {
      return r.fail(FieldReader::join(ip, "type"),
                    "input item type '" + type +
                        "' is not supported (message, reasoning, function_call, "
                        "function_call_output)");
    }
  }
  turn.flush(out);
}

ResponsesRequest read_responses_request(FieldReader& r, const Json& body) {
  ResponsesRequest q;
  q.model = r.str(body, "", "model").value_or("");
  q.stream = r.boolean(body, "", "stream").value_or(false);
  q.store = r.boolean(body, "", "store").value_or(true);
  q.previous_response_id = r.str(body, "", "previous_response_id").value_or("");
  q.instructions = r.str(body, "", "instructions").value_or("");
  auto it = body.find("input");
  if (it == body.end() || it->is_null()) {
    if (q.previous_response_id.empty()) r.fail("input", "is required");
  } else {
    read_input_items(r, *it, "input", q.input_messages);
  }
  if (!r.ok()) return q;
  read_tools(r, body, q);
  q.chat.parallel_tool_calls = r.boolean(body, "", "parallel_tool_calls").value_or(true);
  read_text_format(r, body, q);
  if (auto v = r.integer(body, "", "max_output_tokens", 1, 1 << 24))
    q.max_output_tokens = static_cast<int>(*v);
  if (const Json* reasoning = r.object(body, "", "reasoning")) {
    q.reasoning = *reasoning;
    read_reasoning_effort(r, *reasoning, "reasoning", "effort", q.chat.kwargs);
  }
  if (const Json* md = r.object(body, "", "metadata")) q.metadata = *md;
  return q;
}

}  // namespace t9::server::api
