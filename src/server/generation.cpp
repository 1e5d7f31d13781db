#include "server/generation.h"

#include <algorithm>

#include "core/log.h"
#include "server/metrics.h"

namespace t9::server {

using Clock = std::chrono::steady_clock;

namespace {
chat::ChatEvent content_event(std::string text) {
  chat::ChatEvent e;
  e.kind = chat::ChatEvent::Kind::kContent;
  e.text = std::move(text);
  return e;
}
}  // namespace

const char* finish_name(Finish f) {
  switch (f) {
    case Finish::kNone:
      return "none";
    case Finish::kStop:
      return "stop";
    case Finish::kLength:
      return "length";
    case Finish::kStopString:
      return "stop_string";
    case Finish::kCancelled:
      return "cancelled";
    case Finish::kError:
      return "error";
  }
  return "?";
}

Generation::Generation(ServerContext& ctx, GenerationSpec spec)
    : ctx_(ctx), spec_(std::move(spec)), decoder_(*ctx.tokenizer) {}

Generation::~Generation() {
  if (finished_ || !cancelled_) return;  // finished, or never submitted (start() failed)
  // The client went away before the end (its stream was dropped): cancel, and still count and log
  // the request, as cancelled.
  cancel();
  finish_ = Finish::kCancelled;
  usage_.n_prompt_tokens = static_cast<int>(spec_.prompt.size());
  usage_.n_generated_tokens = n_generated_;
  total_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - t_start_).count();
  if (ctx_.metrics)
    ctx_.metrics->observe_request(usage_, ttft_ms_, total_ms_, finish_name(finish_));
  log_line();
}

namespace {

// A chat output may open with a reasoning block before the structured value: when the prompt
// already opened it (the output starts inside it), or when the template knows the open tag.
grammar::Preamble output_preamble(const ServerContext& ctx, const GenerationSpec& spec) {
  const chat::ReasoningConfig& r = spec.parser.reasoning;
  if (!spec.parse_chat || !r.enabled) return {};
  if (r.starts_in_reasoning) return {"", r.close_tag};
  if (ctx.model.chat_template_source.find(r.open_tag) != std::string::npos)
    return {r.open_tag, r.close_tag};
  return {};
}

}  // namespace

Result<std::unique_ptr<Generation>> Generation::start(ServerContext& ctx, GenerationSpec spec) {
  if (spec.prompt.empty()) return error("prompt: empty after tokenization");
  const int n_ctx = ctx.model.n_ctx;
  if (static_cast<int>(spec.prompt.size()) >= n_ctx) {
    return error("prompt: {} tokens does not fit the context of {} tokens", spec.prompt.size(),
                 n_ctx);
  }
  // Like llama-server: generation stops at the context's end rather than rejecting the request.
  spec.max_tokens = std::min(spec.max_tokens, n_ctx - static_cast<int>(spec.prompt.size()));
  std::unique_ptr<Generation> g(new Generation(ctx, std::move(spec)));
  if (g->spec_.parse_chat) {
    chat::ToolSet tools = g->spec_.tools ? *g->spec_.tools : chat::ToolSet{};
    T9_ASSIGN_OR_RETURN(auto parser,
                        chat::ChatOutputParser::create(g->spec_.parser, std::move(tools)));
    g->parser_.emplace(std::move(parser));
  }
  g->channel_ = engine::TokenChannel::create();
  engine::GenerateRequest req;
  req.prompt = g->spec_.prompt;
  req.sampling = g->spec_.sampling;
  req.max_tokens = g->spec_.max_tokens;
  if (!g->spec_.ignore_eos) req.stop_token_ids = ctx.eog_ids;
  req.logprobs = g->spec_.n_top_logprobs >= 0;
  req.n_top_logprobs = std::max(0, g->spec_.n_top_logprobs);
  if (g->spec_.format.kind != OutputFormat::Kind::kText) {
    T9_ASSIGN_OR_RETURN(req.constraint, ctx.structured->constraint(*ctx.tokenizer, g->spec_.format,
                                                                   output_preamble(ctx, g->spec_),
                                                                   req.stop_token_ids));
  }
  req.on_event = g->channel_->callback();
  g->cancelled_ = req.cancelled;
  g->t_start_ = Clock::now();
  T9_ASSIGN_OR_RETURN(g->id_, ctx.engine->submit(std::move(req)));
  return g;
}

void Generation::cancel() {
  cancelled_->store(true);
}

bool Generation::poll(GenOutput& out, std::chrono::milliseconds timeout) {
  if (finished_) return true;
  engine::TokenEvent ev;
  if (!channel_->pop(&ev, timeout)) return false;
  for (;;) {
    on_token(ev, out);
    if (finished_) return true;
    if (!channel_->pop(&ev, std::chrono::milliseconds(0))) return false;  // drain what is ready
  }
}

void Generation::on_token(const engine::TokenEvent& ev, GenOutput& out) {
  if (stopped_by_string_) {
    // Tokens made after the stop string (until the engine saw the cancel) are dropped.
    if (ev.finish != engine::FinishReason::kNone) {
      engine::Usage u = ev.usage;
      u.n_generated_tokens = n_generated_;
      finish(Finish::kStopString, out, u);
    }
    return;
  }
  const bool is_stop_token =
      ev.finish == engine::FinishReason::kStop && ev.token >= 0 &&
      std::find(ctx_.eog_ids.begin(), ctx_.eog_ids.end(), ev.token) != ctx_.eog_ids.end();
  if (ev.token >= 0 && !is_stop_token) {
    if (n_generated_ == 0)
      ttft_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - t_start_).count();
    ++n_generated_;
    std::string text;
    if (Status s = decoder_.push(ev.token, text); !s.ok()) {
      out.error = s.message();
      finish(Finish::kError, out, ev.usage);
      return;
    }
    out.tokens.push_back(ev.token);
    if (spec_.n_top_logprobs >= 0) {
      TokenLogprob lp{std::string(ctx_.tokenizer->piece(ev.token)), ev.logprob, {}, ev.token, {}};
      for (const auto& t : ev.top_logprobs) {
        lp.top.emplace_back(std::string(ctx_.tokenizer->piece(t.token)), t.logprob);
        lp.top_ids.push_back(t.token);
      }
      out.logprobs.push_back(std::move(lp));
    }
    emit_text(std::move(text), out);
    if (stopped_by_string_) {
      if (ev.finish != engine::FinishReason::kNone) {
        engine::Usage u = ev.usage;
        u.n_generated_tokens = n_generated_;
        finish(Finish::kStopString, out, u);
      }
      return;
    }
  } else if (ev.token >= 0 && n_generated_ == 0) {
    ttft_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - t_start_).count();
  }
  switch (ev.finish) {
    case engine::FinishReason::kNone:
      return;
    case engine::FinishReason::kStop:
      return finish(Finish::kStop, out, ev.usage);
    case engine::FinishReason::kLength:
      return finish(Finish::kLength, out, ev.usage);
    case engine::FinishReason::kCancelled:
      return finish(Finish::kCancelled, out, ev.usage);
    case engine::FinishReason::kError:
      out.error = ev.error;
      return finish(Finish::kError, out, ev.usage);
  }
}

// Appends decoded text, cutting at the first stop string and holding back a suffix that could
// still become one.
void Generation::emit_text(std::string text, GenOutput& out) {
  held_ += text;
  size_t cut = std::string::npos;
  for (const auto& s : spec_.stop) {
    if (s.empty()) continue;
    const size_t p = held_.find(s);
    if (p != std::string::npos && p < cut) {
      cut = p;
      matched_stop_ = s;
    }
  }
  std::string ready;
  if (cut != std::string::npos) {
    ready = held_.substr(0, cut);
    held_.clear();
    stopped_by_string_ = true;
    cancel();
  } else {
    size_t keep = 0;  // longest suffix of held_ that is a proper prefix of a stop string
    for (const auto& s : spec_.stop)
      for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n)
        if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
          keep = n;
          break;
        }
    // Never split a UTF-8 character: move the cut left to a character start.
    size_t split = held_.size() - keep;
    while (split > 0 && split < held_.size() &&
           (static_cast<unsigned char>(held_[split]) & 0xC0) == 0x80)
      --split;
    ready = held_.substr(0, split);
    held_.erase(0, split);
  }
  if (ready.empty()) return;
  if (parser_) {
    parser_->feed(ready, out.events);
  } else {
    out.events.push_back(content_event(std::move(ready)));
  }
}

void Generation::finish(Finish f, GenOutput& out, const engine::Usage& usage) {
  std::string tail;
  decoder_.finish(tail);
  if (f != Finish::kStopString) {
    held_ += tail;
    tail = std::move(held_);
    held_.clear();
    if (!tail.empty()) {
      if (parser_)
        parser_->feed(tail, out.events);
      else
        out.events.push_back(content_event(std::move(tail)));
    }
  }
  if (parser_) parser_->finish(out.events);
  finished_ = true;
  finish_ = f;
  out.finish = f;
  out.stop_string = matched_stop_;
  out.usage = usage;
  out.usage.n_generated_tokens = n_generated_;
  total_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - t_start_).count();
  usage_ = out.usage;
  if (ctx_.metrics) ctx_.metrics->observe_request(out.usage, ttft_ms_, total_ms_, finish_name(f));
  log_line();
}

void Generation::log_line() const {
  const double gen_s = (total_ms_ - ttft_ms_) / 1000.0;
  const double tps = n_generated_ > 1 && gen_s > 0 ? (n_generated_ - 1) / gen_s : 0.0;
  T9_LOG_INFO(
      "request {} {}: prompt {} cached {} generated {} ttft {:.1f} ms {:.1f} tok/s finish {}", id_,
      spec_.protocol, spec_.prompt.size(), usage_.n_cached_prompt_tokens, n_generated_, ttft_ms_,
      tps, finish_name(finish_));
}

}  // namespace t9::server
