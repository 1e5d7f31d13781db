// `tempo9 bench` workloads: what each simulated agent sends, turn by turn. Pure functions of a
// WorkloadSpec and its seed, so two servers (and two runs) see byte-identical requests up to the
// assistant replies each server produced itself.
//
// An agent's request for turn t (1-based) is
//   [system: run header + tool definitions + guidelines (≈ system_tokens tokens)]
//   [turn 1 message][assistant reply 1] ... [turn t message]
// where each turn message has ≈ turn_tokens tokens and turn >= 2 messages are tool results (role
// "tool") when tool_results is set. Sizes are approximate: approx_tokens() counts word and
// punctuation runs, and the pseudo-words are common short English words (one BPE token each in
// the usual vocabularies); the report measures the true ratio from the servers' usage.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace t9::apps::bench {

struct WorkloadSpec {
  std::string name = "agents";  // agents | cold | single | the spec file's name
  int n_agents = 4;             // concurrent agents (= concurrency)
  int n_turns = 3;              // requests per agent per round, each re-sending the history
  int system_tokens = 10000;    // ≈ tokens of the system prompt (tool definitions included)
  int turn_tokens = 300;        // ≈ tokens appended per turn
  int gen_tokens = 128;         // max_tokens per request (ignore_eos is also sent)
  int n_rounds = 1;             // rounds run one after another; round r uses seed + r
  uint64_t seed = 1;
  bool shared_system = true;      // all agents of a round share one system prompt (else one each)
  bool salt_per_request = false;  // a unique salt opens every prompt: no prefix is shared
  bool tool_results = true;       // turn >= 2 messages have role "tool" (else "user")
  // The tool definitions go in the request's `tools` array (the server renders them with its chat
  // template and, with `serve --tool-grammar`, checks any call the model opens) instead of as
  // JSON text in the system prompt; the prose then fills the rest of system_tokens as before.
  bool tools_in_request = false;
  double temperature = 0.0;
  std::string run_id;  // opens every system prompt so a rerun cannot reuse an earlier run's cache
};

// The built-in workloads: "agents", "cold" (agents + per-request salt), "single" (one stream,
// one turn per round, salted so every request has the same fixed prompt length).
Result<WorkloadSpec> preset(const std::string& name);

// Overlays a JSON spec file's fields on `base`. Fields: name, agents, turns, system_tokens,
// turn_tokens, gen_tokens, rounds, seed, shared_system, salt_per_request, tool_results,
// tools_in_request, temperature. Unknown fields and wrong types are errors naming the field.
Result<WorkloadSpec> parse_spec_json(const std::string& text, WorkloadSpec base);

// Rejects counts that are out of range (each message names the field).
Status validate(const WorkloadSpec& spec);

nlohmann::json to_json(const WorkloadSpec& spec);

// Pseudo-prose of `n_tokens` approximate tokens (words and periods), a pure function of `seed`.
std::string pseudo_text(uint64_t seed, int n_tokens);

// Mixes several values into one 64-bit seed (splitmix64 steps).
uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0);

struct ChatMessage {
  std::string role;  // system | user | assistant | tool
  std::string content;
};

// One agent's conversation in one round. Not thread-safe; each agent thread owns its own.
class AgentConversation {
 public:
  AgentConversation(const WorkloadSpec& spec, int round, int agent);

  // The OpenAI chat request for turn `turn` (1-based; turns must be asked for in order, each after
  // the previous reply was added). `salt` (empty: none) is put at the very start of the prompt.
  nlohmann::json request(int turn, const std::string& model, const std::string& salt);

  // Appends the assistant reply of the turn just sent, so the next turn re-sends it.
  void add_reply(const std::string& reply);

  // approx_tokens() of the last request's messages (system + history), before any chat template.
  int last_approx_tokens() const { return last_approx_; }

 private:
  const WorkloadSpec& spec_;
  int round_, agent_;
  std::string system_;
  nlohmann::json tools_;              // WorkloadSpec::tools_in_request: the request's tools array
  std::vector<ChatMessage> history_;  // after the system message
  int last_approx_ = 0;
};

// The system prompt for (round, agent): run header, tool definitions as JSON text, guidelines.
// With spec.tools_in_request the definitions go to *tools (an array) instead of the text.
std::string system_prompt(const WorkloadSpec& spec, int round, int agent,
                          nlohmann::json* tools = nullptr);

// The workload's token estimate: runs of letters/digits plus runs of other non-space characters.
int approx_tokens(const std::string& text);

}  // namespace t9::apps::bench
