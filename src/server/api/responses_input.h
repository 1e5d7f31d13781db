// The OpenAI Responses API's request (POST /v1/responses), read into the server's ChatInput: the
// input items become template messages (an assistant message, its reasoning and its function
// calls fold into one assistant message with tool_calls; function_call_output items become role
// "tool" messages), `instructions` a leading system message, function tools the template's
// tools. Internal to the server's API layer (responses.cpp).
#pragma once

#include <optional>
#include <string>

#include "server/http_util.h"
#include "server/prompt_builder.h"
#include "server/structured_output.h"

namespace t9::server::api {

struct ResponsesRequest {
  // Tools, tool_choice, reasoning's template kwargs; `messages` is left for the handler to
  // compose: instructions, a stored conversation (previous_response_id), input_messages.
  ChatInput chat;
  Json input_messages = Json::array();
  std::string model;
  bool stream = false;
  bool store = true;
  std::string previous_response_id;  // "": none
  std::optional<int> max_output_tokens;
  OutputFormat format;  // text.format
  // Echoed in the response object as given (or their defaults).
  Json tools = Json::array();
  Json tool_choice = "auto";
  Json text = {{"format", {{"type", "text"}}}};
  Json reasoning = {{"effort", nullptr}, {"summary", nullptr}};
  Json metadata = Json::object();
  std::string instructions;
};

// Reads everything but sampling (read_sampling) into a ResponsesRequest; errors go to `r` with
// the field's path ("input[2].content[0].type").
ResponsesRequest read_responses_request(FieldReader& r, const Json& body);

// Input items (a string, or an array of items) as template messages appended to `out`.
void read_input_items(FieldReader& r, const Json& input, const std::string& path, Json& out);

}  // namespace t9::server::api
