#include "apps/bench_workload.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>
#include <type_traits>

namespace t9::apps::bench {
namespace {

using Json = nlohmann::json;

// Common short English words: with a leading space each is one token in GPT-2-style and
// SentencePiece vocabularies, so word counts stay close to token counts.
constexpr std::array<std::string_view, 128> kWords = {
    "the",    "of",    "and",   "to",    "in",     "is",    "was",  "it",    "for",   "on",
    "are",    "as",    "with",  "his",   "they",   "at",    "be",   "this",  "have",  "from",
    "or",     "one",   "had",   "by",    "word",   "but",   "not",  "what",  "all",   "were",
    "we",     "when",  "your",  "can",   "said",   "there", "use",  "an",    "each",  "which",
    "she",    "do",    "how",   "their", "if",     "will",  "up",   "other", "about", "out",
    "many",   "then",  "them",  "these", "so",     "some",  "her",  "would", "make",  "like",
    "him",    "into",  "time",  "has",   "look",   "two",   "more", "write", "go",    "see",
    "number", "no",    "way",   "could", "people", "my",    "than", "first", "water", "been",
    "call",   "who",   "oil",   "its",   "now",    "find",  "long", "down",  "day",   "did",
    "get",    "come",  "made",  "may",   "part",   "file",  "code", "test",  "run",   "build",
    "list",   "value", "error", "line",  "data",   "user",  "name", "path",  "read",  "open",
    "close",  "start", "stop",  "check", "send",   "text",  "page", "order", "set",   "new",
    "old",    "last",  "next",  "small", "large",  "fast",  "slow", "good"};

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// One tool definition, ≈ 95 approximate tokens as JSON text.
Json tool_definition(uint64_t seed, int index) {
  uint64_t s = seed;
  auto word = [&] { return std::string(kWords[splitmix64(s) % kWords.size()]); };
  const std::string name = word() + "_" + word() + "_" + std::to_string(index);
  Json props = Json::object();
  for (int p = 0; p < 3; ++p)
    props[word() + "_" + std::to_string(p)] = {{"type", p == 2 ? "integer" : "string"},
                                               {"description", pseudo_text(splitmix64(s), 6)}};
  Json tool = {{"type", "function"},
               {"function",
                {{"name", name},
                 {"description", pseudo_text(splitmix64(s), 14)},
                 {"parameters", {{"type", "object"}, {"properties", props}}}}}};
  return tool;
}

Json message_json(const ChatMessage& m) {
  return {{"role", m.role}, {"content", m.content}};
}

}  // namespace

uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  uint64_t s = a;
  for (uint64_t v : {b, c, d}) {
    s ^= splitmix64(s) + v;
    splitmix64(s);
  }
  return splitmix64(s);
}

std::string pseudo_text(uint64_t seed, int n_tokens) {
  uint64_t s = seed;
  std::string out;
  out.reserve(static_cast<size_t>(n_tokens) * 5);
  int since_period = 0;
  for (int n = 0; n < n_tokens; ++n) {
    if (!out.empty()) out += ' ';
    out += kWords[splitmix64(s) % kWords.size()];
    // Sentences of 8..15 words keep the text tokenizing like prose rather than one long run; the
    // period is a piece (a token) of its own.
    if (++since_period >= 8 && n + 1 < n_tokens && (splitmix64(s) % 8 == 0 || since_period >= 15)) {
      out += '.';
      since_period = 0;
      ++n;
    }
  }
  return out;
}

int approx_tokens(const std::string& text) {
  // Runs of letters/digits and runs of punctuation: within 10% of BPE counts for both the prose
  // and the JSON tool definitions made here (SmolLM2: 91 pieces vs 103 tokens for one tool).
  int n = 0;
  int prev = 0;  // 0 space, 1 alnum, 2 punctuation
  for (unsigned char c : text) {
    const int cls = std::isspace(c) ? 0 : (std::isalnum(c) ? 1 : 2);
    if (cls != 0 && cls != prev) ++n;
    prev = cls;
  }
  return n;
}

std::string system_prompt(const WorkloadSpec& spec, int round, int agent, Json* tools) {
  const uint64_t base =
      mix_seed(spec.seed + static_cast<uint64_t>(round), spec.shared_system ? 0 : agent + 1);
  std::string out = "Run " + spec.run_id + ". You are a coding agent. You can call these tools:\n";
  // About a third of the budget goes to tool definitions (~95 tokens each), the rest to prose.
  const int tool_budget = spec.system_tokens / 3;
  int tool_tokens = approx_tokens(out);
  for (int i = 0; i < 64 && tool_tokens + 95 <= tool_budget; ++i) {
    const Json tool = tool_definition(mix_seed(base, 1, static_cast<uint64_t>(i)), i);
    const std::string text = tool.dump() + "\n";
    tool_tokens += approx_tokens(text);
    if (spec.tools_in_request && tools != nullptr)
      tools->push_back(tool);
    else
      out += text;
  }
  out += "Guidelines:\n";
  const int rest = spec.system_tokens - (tool_tokens + approx_tokens("Guidelines:\n"));
  if (rest > 0) out += pseudo_text(mix_seed(base, 2), rest);
  return out;
}

AgentConversation::AgentConversation(const WorkloadSpec& spec, int round, int agent)
    : spec_(spec), round_(round), agent_(agent), tools_(Json::array()) {
  system_ = system_prompt(spec, round, agent, &tools_);
}

Json AgentConversation::request(int turn, const std::string& model, const std::string& salt) {
  const uint64_t s = mix_seed(spec_.seed + static_cast<uint64_t>(round_), 100 + agent_, turn);
  ChatMessage msg;
  if (turn >= 2 && spec_.tool_results) {
    msg.role = "tool";
    msg.content =
        "Result of call " + std::to_string(turn - 1) + ": " + pseudo_text(s, spec_.turn_tokens);
  } else {
    msg.role = "user";
    msg.content = pseudo_text(s, spec_.turn_tokens);
  }
  history_.push_back(std::move(msg));

  Json messages = Json::array();
  messages.push_back(
      {{"role", "system"}, {"content", salt.empty() ? system_ : salt + "\n" + system_}});
  last_approx_ = approx_tokens(messages[0]["content"].get_ref<const std::string&>());
  for (const Json& t : tools_) last_approx_ += approx_tokens(t.dump() + "\n");  // rendered too
  for (const auto& m : history_) {
    messages.push_back(message_json(m));
    last_approx_ += approx_tokens(m.content);
  }
  Json req = {{"model", model},
              {"messages", std::move(messages)},
              {"stream", true},
              {"stream_options", {{"include_usage", true}}},
              {"max_tokens", spec_.gen_tokens},
              {"ignore_eos", true},
              {"temperature", spec_.temperature}};
  if (!tools_.empty()) req["tools"] = tools_;
  return req;
}

void AgentConversation::add_reply(const std::string& reply) {
  history_.push_back({"assistant", reply});
}

Result<WorkloadSpec> preset(const std::string& name) {
  WorkloadSpec s;
  s.name = name;
  if (name == "agents") return s;
  if (name == "cold") {
    s.salt_per_request = true;
    return s;
  }
  if (name == "single") {
    s.n_agents = 1;
    s.n_turns = 1;
    s.salt_per_request = true;
    return s;
  }
  return error("workload '{}' is not one of agents, cold, single", name);
}

namespace {

template <typename T>
Status read_field(const Json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end()) return {};
  if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return error("spec field '{}': expected true or false", key);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return error("spec field '{}': expected a string", key);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!it->is_number()) return error("spec field '{}': expected a number", key);
  } else {
    if (!it->is_number_integer()) return error("spec field '{}': expected an integer", key);
    if constexpr (std::is_signed_v<T>) {
      if (it->get<int64_t>() < 0 || it->get<int64_t>() > (1 << 30))
        return error("spec field '{}': {} is out of range", key, it->dump());
    } else if (!it->is_number_unsigned()) {
      return error("spec field '{}': expected a non-negative integer", key);
    }
  }
  out = it->get<T>();
  return {};
}

}  // namespace

Result<WorkloadSpec> parse_spec_json(const std::string& text, WorkloadSpec s) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return error("spec: not a JSON object");
  static const std::array<std::string_view, 13> kKnown = {"name",
                                                          "agents",
                                                          "turns",
                                                          "system_tokens",
                                                          "turn_tokens",
                                                          "gen_tokens",
                                                          "rounds",
                                                          "seed",
                                                          "shared_system",
                                                          "salt_per_request",
                                                          "tool_results",
                                                          "temperature",
                                                          "tools_in_request"};
  for (const auto& [key, _] : j.items())
    if (std::find(kKnown.begin(), kKnown.end(), key) == kKnown.end())
      return error(
          "spec field '{}': unknown (known: name, agents, turns, system_tokens, turn_tokens, "
          "gen_tokens, rounds, seed, shared_system, salt_per_request, tool_results, temperature, "
          "tools_in_request)",
          key);
  T9_TRY(read_field(j, "name", s.name));
  T9_TRY(read_field(j, "agents", s.n_agents));
  T9_TRY(read_field(j, "turns", s.n_turns));
  T9_TRY(read_field(j, "system_tokens", s.system_tokens));
  T9_TRY(read_field(j, "turn_tokens", s.turn_tokens));
  T9_TRY(read_field(j, "gen_tokens", s.gen_tokens));
  T9_TRY(read_field(j, "rounds", s.n_rounds));
  T9_TRY(read_field(j, "seed", s.seed));
  T9_TRY(read_field(j, "shared_system", s.shared_system));
  T9_TRY(read_field(j, "salt_per_request", s.salt_per_request));
  T9_TRY(read_field(j, "tool_results", s.tool_results));
  T9_TRY(read_field(j, "temperature", s.temperature));
  T9_TRY(read_field(j, "tools_in_request", s.tools_in_request));
  return s;
}

Status validate(const WorkloadSpec& s) {
  if (s.n_agents < 1 || s.n_agents > 1024) return error("agents: {} is not in 1..1024", s.n_agents);
  if (s.n_turns < 1 || s.n_turns > 1000) return error("turns: {} is not in 1..1000", s.n_turns);
  if (s.n_rounds < 1 || s.n_rounds > 1000) return error("rounds: {} is not in 1..1000", s.n_rounds);
  if (s.system_tokens < 0 || s.system_tokens > 1000000)
    return error("system_tokens: {} is not in 0..1000000", s.system_tokens);
  if (s.turn_tokens < 1 || s.turn_tokens > 1000000)
    return error("turn_tokens: {} is not in 1..1000000", s.turn_tokens);
  if (s.gen_tokens < 1 || s.gen_tokens > 1000000)
    return error("gen_tokens: {} is not in 1..1000000", s.gen_tokens);
  if (!(s.temperature >= 0 && s.temperature <= 10))
    return error("temperature: {} is not in 0..10", s.temperature);
  return {};
}

Json to_json(const WorkloadSpec& s) {
  return {{"name", s.name},
          {"agents", s.n_agents},
          {"turns", s.n_turns},
          {"system_tokens", s.system_tokens},
          {"turn_tokens", s.turn_tokens},
          {"gen_tokens", s.gen_tokens},
          {"rounds", s.n_rounds},
          {"seed", s.seed},
          {"shared_system", s.shared_system},
          {"salt_per_request", s.salt_per_request},
          {"tool_results", s.tool_results},
          {"temperature", s.temperature},
          {"tools_in_request", s.tools_in_request},
          {"run_id", s.run_id}};
}

}  // namespace t9::apps::bench
