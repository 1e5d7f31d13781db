// OpenAI Responses API: POST /v1/responses (streamed as semantic events: response.created,
// response.output_item.added / .done, response.content_part.added / .done,
// response.output_text.delta / .done, response.reasoning_text.delta / .done,
// response.function_call_arguments.delta / .done, response.completed | incomplete | failed, each
// with its sequence_number), GET and DELETE /v1/responses/{id}. Agents built on it (the OpenAI
// Agents SDK, Codex-style clients) send the whole conversation each turn (store: false), or name
// the previous response (previous_response_id): the server keeps the last kStoredResponses
// stored conversations in memory for that, and the prefix cache makes either form cost only the
// new suffix. Request reading: responses_input.h.
#include <httplib.h>

#include <deque>
#include <mutex>
#include <unordered_map>

#include "server/api/common.h"
#include "server/api/responses_input.h"

namespace t9::server::api {
namespace {

constexpr Protocol kP = Protocol::kOpenAI;
constexpr size_t kStoredResponses = 256;
constexpr size_t kStoredBytes = size_t{64} << 20;  // their conversations' JSON, all together

// Responses created with store: true, for previous_response_id and GET: the conversation up to
// and including the response's output (template messages, instructions excluded: a follow-up
// gives its own) and the response object. At most kStoredResponses of them and kStoredBytes of
// their JSON (the newest one is kept whatever its size); the oldest go first.
class ResponseStore {
 public:
  struct Entry {
    Json conversation;
    Json response;
    size_t bytes = 0;  // the conversation's and response's JSON size
  };
  void put(const std::string& id, Entry e) {
    e.bytes = e.conversation.dump().size() + e.response.dump().size();
    const size_t bytes = e.bytes;
    std::lock_guard lock(mu_);
    if (!entries_.emplace(id, std::move(e)).second) return;  // ids are random: never in practice
    bytes_ += bytes;
    order_.push_back(id);
    while (order_.size() > kStoredResponses || (bytes_ > kStoredBytes && order_.size() > 1)) {
      bytes_ -= entries_.at(order_.front()).bytes;
      entries_.erase(order_.front());
      order_.pop_front();
    }
  }
  std::optional<Entry> get(const std::string& id) const {
    std::lock_guard lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    return it->second;
  }
  bool erase(const std::string& id) {
    std::lock_guard lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return false;
    bytes_ -= it->second.bytes;
    entries_.erase(it);
    std::erase(order_, id);
    return true;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::deque<std::string> order_;
  size_t bytes_ = 0;
};

// The output items of one response, built from the generation's chat events, and (constructed
// with stream = true) their stream events. Items open as their first event arrives and close when
// another kind starts or the output ends.
class OutputItems {
 public:
  explicit OutputItems(bool stream) : stream_(stream) {}

  // The events of one poll; their SSE text is appended to *out when streaming.
  void apply(const std::vector<chat::ChatEvent>& events, std::string* out) {
    using K = chat::ChatEvent::Kind;
    for (const chat::ChatEvent& e : events) {
      switch (e.kind) {
        case K::kContent:
          if (e.text.empty()) break;
          if (kind_ != kMessage) open_message(out);
          text_ += e.text;
          emit(out, "response.output_text.delta",
               part_event({{"delta", e.text}, {"logprobs", Json::array()}}));
          break;
        case K::kReasoning:
          if (e.text.empty()) break;
          if (kind_ != kReasoning) open_reasoning(out);
          text_ += e.text;
          emit(out, "response.reasoning_text.delta", part_event({{"delta", e.text}}));
          break;
        case K::kToolCallStart:
          open_call(out, e.id, e.name);
          break;
        case K::kToolCallArgs:
          if (kind_ != kCall) break;
          text_ += e.text;
          emit(out, "response.function_call_arguments.delta",
               {{"item_id", item_["id"]}, {"output_index", index()}, {"delta", e.text}});
          break;
        case K::kToolCallEnd:
          close(out, "completed");
          break;
      }
    }
  }
  // Closes the open item: "completed", or "incomplete" when the output was cut short.
  void close(std::string* out, const char* status) {
    if (kind_ == kNone) return;
    if (kind_ == kMessage) {
      const Json part = {{"type", "output_text"},
                         {"text", text_},
                         {"annotations", Json::array()},
                         {"logprobs", Json::array()}};
      emit(out, "response.output_text.done",
           part_event({{"text", text_}, {"logprobs", Json::array()}}));
      emit(out, "response.content_part.done", part_event({{"part", part}}));
      item_["content"] = Json::array({part});
      item_["status"] = status;
    } else if (kind_ == kReasoning) {
      emit(out, "response.reasoning_text.done", part_event({{"text", text_}}));
      item_["content"] = Json::array({{{"type", "reasoning_text"}, {"text", text_}}});
    } else {
      emit(out, "response.function_call_arguments.done",
           {{"item_id", item_["id"]},
            {"output_index", index()},
            {"name", item_["name"]},
            {"arguments", text_}});
      item_["arguments"] = text_;
      item_["status"] = status;
    }
    emit(out, "response.output_item.done", {{"output_index", index()}, {"item", item_}});
    items_.push_back(std::move(item_));
    item_ = Json();
    text_.clear();
    kind_ = kNone;
  }

  const Json& items() const { return items_; }
  // The output as one template message, for a stored conversation.
  Json as_message() const {
    Json msg = {{"role", "assistant"}, {"content", ""}};
    Json calls = Json::array();
    std::string content, reasoning;
    for (const Json& it : items_) {
      const std::string type = it["type"];
      if (type == "message") content += it["content"][0]["text"].get<std::string>();
      if (type == "reasoning") reasoning += it["content"][0]["text"].get<std::string>();
      if (type == "function_call") {
        calls.push_back(
            {{"id", it["call_id"]},
             {"type", "function"},
             {"function",
              {{"name", it["name"]}, {"arguments", arguments_object(it["arguments"])}}}});
      }
    }
    msg["content"] = content;
    if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
    if (!calls.empty()) msg["tool_calls"] = calls;
    return msg;
  }
  // The SSE text of one event, numbered.
  std::string event(const char* type, Json data) {
    data["type"] = type;
    data["sequence_number"] = seq_++;
    return std::string("event: ") + type +
           "\ndata: " + data.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
  }

 private:
  enum Kind { kNone, kMessage, kReasoning, kCall };
  int index() const { return static_cast<int>(items_.size()); }
  void emit(std::string* out, const char* type, Json data) {
    if (stream_ && out != nullptr) *out += event(type, std::move(data));
  }
  Json part_event(Json fields) const {
    Json d = {{"item_id", item_["id"]}, {"output_index", index()}, {"content_index", 0}};
    d.update(fields);
    return d;
  }
  void open(std::string* out, Kind kind, Json item) {
    close(out, "completed");
    kind_ = kind;
    item_ = std::move(item);
    emit(out, "response.output_item.added", {{"output_index", index()}, {"item", item_}});
  }
  void open_message(std::string* out) {
    open(out, kMessage,
         {{"type", "message"},
          {"id", random_id("msg_")},
          {"status", "in_progress"},
          {"role", "assistant"},
          {"content", Json::array()}});
    emit(out, "response.content_part.added",
         part_event({{"part",
                      {{"type", "output_text"},
                       {"text", ""},
                       {"annotations", Json::array()},
                       {"logprobs", Json::array()}}}}));
  }
  void open_reasoning(std::string* out) {
    open(out, kReasoning,
         {{"type", "reasoning"}, {"id", random_id("rs_")}, {"summary", Json::array()}});
  }
  void open_call(std::string* out, const std::string& call_id, const std::string& name) {
    open(out, kCall,
         {{"type", "function_call"},
          {"id", random_id("fc_")},
          {"call_id", call_id},
          {"name", name},
          {"arguments", ""},
          {"status", "in_progress"}});
  }

  bool stream_;
  Kind kind_ = kNone;
  Json item_;         // the open item
  std::string text_;  // its text, reasoning or arguments so far
  Json items_ = Json::array();
  int seq_ = 0;
};

// What a response object echoes of its request, and the pieces of the result.
struct ResponseInfo {
  std::string id, model;
  int64_t created_at = unix_seconds();
  const ResponsesRequest* q = nullptr;
  float temperature = 1.0f, top_p = 1.0f;
};

Json usage_json(const engine::Usage& u) {
  return {{"input_tokens", u.n_prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", u.n_cached_prompt_tokens}}},
          {"output_tokens", u.n_generated_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", u.n_prompt_tokens + u.n_generated_tokens}};
}

// status: in_progress, completed, incomplete (max_output_tokens), failed.
Json response_json(const ResponseInfo& info, const char* status, const Json& output,
                   const engine::Usage* usage, const std::string& error = "") {
  const ResponsesRequest& q = *info.q;
  Json r = {{"id", info.id},
            {"object", "response"},
            {"created_at", info.created_at},
            {"status", status},
            {"error", nullptr},
            {"incomplete_details", nullptr},
            {"instructions", q.instructions.empty() ? Json() : Json(q.instructions)},
            {"max_output_tokens", q.max_output_tokens ? Json(*q.max_output_tokens) : Json()},
            {"model", info.model},
            {"output", output},
            {"parallel_tool_calls", q.chat.parallel_tool_calls},
            {"previous_response_id",
             q.previous_response_id.empty() ? Json() : Json(q.previous_response_id)},
            {"reasoning", q.reasoning},
            {"store", q.store},
            {"temperature", info.temperature},
            {"text", q.text},
            {"tool_choice", q.tool_choice},
            {"tools", q.tools},
            {"top_p", info.top_p},
            {"truncation", "disabled"},
            {"usage", usage ? usage_json(*usage) : Json()},
            {"metadata", q.metadata}};
  if (std::string(status) == "incomplete")
    r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  if (std::string(status) == "failed") r["error"] = {{"code", "server_error"}, {"message", error}};
  return r;
}

const char* final_status(const GenOutput& out) {
  if (out.finish == Finish::kError) return "failed";
  return out.finish == Finish::kLength ? "incomplete" : "completed";
}

// Stores a finished response (store: true) with its conversation.
void remember(ResponseStore& store, const ResponseInfo& info, Json conversation,
              const OutputItems& items, const Json& response) {
  if (!info.q->store) return;
  conversation.push_back(items.as_message());
  store.put(info.id, {std::move(conversation), response});
}

class ResponsesStream final : public StreamFormatter {
 public:
  ResponsesStream(ResponseInfo info, std::shared_ptr<ResponseStore> store, Json conversation,
                  std::shared_ptr<const ResponsesRequest> q)
      : q_(std::move(q)),
        info_(std::move(info)),
        store_(std::move(store)),
        conversation_(std::move(conversation)) {
    info_.q = q_.get();
  }

  std::string begin() override {
    const Json r = response_json(info_, "in_progress", Json::array(), nullptr);
    std::string s = items_.event("response.created", {{"response", r}});
    return s + items_.event("response.in_progress", {{"response", r}});  // numbered in order
  }
  std::string keepalive() override { return ": keepalive\n\n"; }

  std::string on_output(const GenOutput& out) override {
    std::string s;
    items_.apply(out.events, &s);
    if (out.finish == Finish::kNone) return s;
    const char* status = final_status(out);
    items_.close(&s, out.finish == Finish::kLength ? "incomplete" : "completed");
    const Json r = response_json(info_, status, items_.items(), &out.usage, out.error);
    if (out.finish != Finish::kError) remember(*store_, info_, conversation_, items_, r);
    const char* type = out.finish == Finish::kError    ? "response.failed"
                       : out.finish == Finish::kLength ? "response.incomplete"
                                                       : "response.completed";
    return s + items_.event(type, {{"response", r}});
  }

 private:
  std::shared_ptr<const ResponsesRequest> q_;  // what info_.q points to, for the stream's life
  ResponseInfo info_;
  std::shared_ptr<ResponseStore> store_;
  Json conversation_;
  OutputItems items_{true};
};

void handle_create(ServerContext& ctx, const std::shared_ptr<ResponseStore>& store,
                   const httplib::Request& req, httplib::Response& res) {
  std::string err;
  auto body = parse_json_object(req.body, err);
  if (!body) return send_error(res, kP, 400, err);
  FieldReader r;
  auto q = std::make_shared<ResponsesRequest>(read_responses_request(r, *body));
  if (!r.ok()) return send_bad_request(res, kP, r);
  if (!check_model_name(ctx, q->model, kP, res)) return;
  // The conversation: a stored one first, then this request's input; instructions lead.
  Json conversation = Json::array();
  if (!q->previous_response_id.empty()) {
    auto prev = store->get(q->previous_response_id);
    if (!prev)
      return send_error(res, kP, 404,
                        "previous response '" + q->previous_response_id +
                            "' not found (responses are kept in memory, the last " +
                            std::to_string(kStoredResponses) + " with store: true)",
                        "previous_response_id");
    conversation = prev->conversation;
  }
  for (const Json& m : q->input_messages) conversation.push_back(m);
  if (conversation.empty()) return send_error(res, kP, 400, "input: is empty", "input");
  ChatInput chat = q->chat;
  if (!q->instructions.empty())
    chat.messages.push_back({{"role", "system"}, {"content", q->instructions}});
  for (const Json& m : conversation) chat.messages.push_back(m);
  auto spec = chat_generation_spec(ctx, chat);
  if (!spec.ok())
    return send_error(res, kP, 400, spec.message(),
                      spec.message().starts_with("tool_choice") ? "tool_choice" : "input");
  read_sampling(r, *body, "", *spec);
  if (!r.ok()) return send_bad_request(res, kP, r);
  if (q->format.kind != OutputFormat::Kind::kText) spec->format = q->format;
  spec->max_tokens = q->max_output_tokens.value_or(ctx.config.default_max_tokens);
  spec->protocol = "openai";
  ResponseInfo info{random_id("resp_"), q->model.empty() ? ctx.model.id : q->model};
  info.q = q.get();
  info.temperature = spec->sampling.temperature;
  info.top_p = spec->sampling.top_p;
  std::shared_ptr<Generation> g = start_generation(ctx, std::move(spec).value(), kP, res);
  if (!g) return;
  if (q->stream)
    return stream_generation(
        res, "text/event-stream", g,
        std::make_shared<ResponsesStream>(info, store, std::move(conversation), q));
  GenOutput out = collect_generation(*g, nullptr);
  if (out.finish == Finish::kError) return send_error(res, kP, 500, out.error);
  OutputItems items(false);
  items.apply(out.events, nullptr);
  items.close(nullptr, out.finish == Finish::kLength ? "incomplete" : "completed");
  const Json resp = response_json(info, final_status(out), items.items(), &out.usage);
  remember(*store, info, std::move(conversation), items, resp);
  send_json(res, resp);
}

}  // namespace

void register_responses(httplib::Server& http, ServerContext& ctx) {
  auto store = std::make_shared<ResponseStore>();
  http.Post("/v1/responses", [&ctx, store](const httplib::Request& q, httplib::Response& s) {
    handle_create(ctx, store, q, s);
  });
  const char* kById = R"(/v1/responses/([A-Za-z0-9_\-]+))";
  http.Get(kById, [store](const httplib::Request& q, httplib::Response& s) {
    auto e = store->get(q.matches[1]);
    if (!e) return send_error(s, kP, 404, "response '" + std::string(q.matches[1]) + "' not found");
    send_json(s, e->response);
  });
  http.Delete(kById, [store](const httplib::Request& q, httplib::Response& s) {
    const std::string id = q.matches[1];
    if (!store->erase(id)) return send_error(s, kP, 404, "response '" + id + "' not found");
    send_json(s, {{"id", id}, {"object", "response.deleted"}, {"deleted", true}});
  });
}

}  // namespace t9::server::api
