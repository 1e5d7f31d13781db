// Greedy output is a contract (ARCHITECTURE.md rule 7), checked with the real SmolLM2 model on
// the CPU backend: at temperature 0 a request's tokens are identical alone or batched, with a cold
// or a warm prefix cache, with any prefill chunk size, and across preemptions. The reference for
// every comparison is the same prompt run alone, whole-prompt prefill, in a fresh engine.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "engine/token_channel.h"
#include "model/engine_runner.h"
#include "unit/integration/real_engine.h"

namespace t9::integration {
namespace {

constexpr int kGen = 16;  // tokens generated per request

// Eight prompts of different lengths (tokenized: roughly 3 to 70 tokens), no shared 16-token
// prefix, so that (a) compares batching alone and not prefix sharing.
const std::vector<std::string>& short_texts() {
  static const std::vector<std::string> t = {
      "The capital of France is",
      "def fibonacci(n):",
      "Once upon a time, in a small village at the edge of a dark forest, there lived an old "
      "woodcutter and his",
      "Water boils at",
      "List three prime numbers greater than ten and explain why each of them is prime:",
      "In 1969, the Apollo 11 mission landed the first humans on the Moon. The astronauts "
      "were Neil Armstrong, Buzz Aldrin and Michael Collins. Armstrong stepped onto the lunar "
      "surface first and said",
      "SELECT name, age FROM users WHERE",
      "Photosynthesis is the process by which green plants use sunlight, water and carbon "
      "dioxide to make glucose and oxygen. It takes place mainly in the leaves, inside small "
      "structures called chloroplasts, which contain a green pigment named chlorophyll. The "
      "overall reaction can be written as",
  };
  return t;
}

// About 200 tokens: long enough that 16- and 128-token chunks split it several times.
std::string long_text() {
  return "The history of computing begins long before electronic machines. Early tools such as "
         "the abacus helped merchants add and subtract, and in the seventeenth century Blaise "
         "Pascal built a mechanical calculator with gears. Charles Babbage later designed the "
         "Analytical Engine, a general purpose machine programmed with punched cards, and Ada "
         "Lovelace wrote what many consider the first program for it. In the twentieth century, "
         "Alan Turing described an abstract machine that could compute anything computable, and "
         "during the Second World War engineers built electronic computers to break codes and "
         "calculate artillery tables. The invention of the transistor in 1947 and of the "
         "integrated circuit a decade later made computers smaller, cheaper and faster. By the "
         "1980s personal computers had reached homes and schools, and the internet soon "
         "connected them. Today a phone in a pocket is more powerful than the room-sized "
         "machines of the past. The next chapter of this story is";
}

class EngineEquality : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Result<RealModel*> rm = smollm2();
    if (!rm.ok()) {
      load_error_ = rm.message();
      return;
    }
    rm_ = *rm;
  }

  void SetUp() override { ASSERT_NE(rm_, nullptr) << "model needed: " << load_error_; }

  static std::vector<TokenId> encode(const std::string& text) {
    auto ids = rm_->tokenizer->encode(text);
    EXPECT_TRUE(ids.ok()) << ids.message();
    return ids.ok() ? *ids : std::vector<TokenId>{};
  }

  static std::vector<std::vector<TokenId>> short_prompts() {
    std::vector<std::vector<TokenId>> p;
    for (const std::string& t : short_texts()) p.push_back(encode(t));
    return p;
  }

  // The reference: `prompt` alone in a fresh engine, whole-prompt prefill; memoized per prompt.
  // It runs on a second instance of the model, so a test's own engine may stay alive meanwhile.
  static const std::vector<TokenId>& alone(const std::vector<TokenId>& prompt) {
    static std::map<std::vector<TokenId>, std::vector<TokenId>> memo;
    auto it = memo.find(prompt);
    if (it != memo.end()) return it->second;
    Result<RealModel*> twin = smollm2_twin();
    EXPECT_TRUE(twin.ok()) << twin.message();
    EngineSession s(**twin, EngineSetup{});
    std::vector<Output> out = s.run({prompt}, kGen);
    EXPECT_EQ(out[0].finish, engine::FinishReason::kLength) << out[0].error;
    EXPECT_EQ(out[0].tokens.size(), static_cast<size_t>(kGen));
    return memo.emplace(prompt, out[0].tokens).first->second;
  }

  // Every output finished by length with exactly the reference's tokens.
  static void expect_same_as_alone(const std::vector<std::vector<TokenId>>& prompts,
                                   const std::vector<Output>& outs, const char* what) {
    ASSERT_EQ(outs.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(outs[i].finish, engine::FinishReason::kLength)
          << what << " #" << i << ": " << outs[i].error;
      EXPECT_EQ(outs[i].tokens, alone(prompts[i]))
          << what << ": request #" << i << " (" << prompts[i].size() << " prompt tokens)";
    }
  }

  static std::string lengths(const std::vector<std::vector<TokenId>>& prompts) {
    std::string s;
    for (const auto& p : prompts) {
      if (!s.empty()) s.push_back(',');
      s.append(std::to_string(p.size()));
    }
    return s;
  }

  static inline RealModel* rm_ = nullptr;
  static inline std::string load_error_;
};

// (a) Eight requests submitted together run in the same steps (prefills batched together, then
// 8-row decodes) and must produce what each produces alone.
TEST_F(EngineEquality, AloneEqualsBatchedWithSevenOthers) {
  const auto prompts = short_prompts();
  for (const auto& p : prompts) alone(p);  // references first, each in its own engine
  // Guard against comparing garbage: the model must answer the first prompt correctly.
  auto text = rm_->tokenizer->decode(alone(prompts[0]));
  ASSERT_TRUE(text.ok()) << text.message();
  EXPECT_EQ(text->rfind(" Paris", 0), 0u) << "'" << short_texts()[0] << "' -> '" << *text << "'";
  EngineSession s(*rm_, EngineSetup{});
  std::vector<Output> outs = s.run(prompts, kGen);
  expect_same_as_alone(prompts, outs, "batched");
  const engine::EngineStats st = s.stats();
  // All eight were admitted in the first step, so decode steps carried 8 sequences:
  // 1 prefill step (which samples the first token) + (kGen - 1) decode steps.
  EXPECT_EQ(st.n_generated_tokens, 8 * kGen);
  EXPECT_EQ(st.n_steps, kGen);
  std::printf(
      "[ compared ] %zu requests (prompt tokens %s), %d tokens each: alone == batched "
      "(%lld steps)\n",
      prompts.size(), lengths(prompts).c_str(), kGen, static_cast<long long>(st.n_steps));
}

// (a'') Pipelined steps: every decode step after the first is planned and enqueued before the
// step whose token it reads has returned; the tokens must be those of each prompt alone.
TEST_F(EngineEquality, PipelinedStepsEqualAlone) {
  const auto prompts = short_prompts();
  for (const auto& p : prompts) alone(p);
  EngineSetup setup;
  setup.pipeline = true;
  EngineSession s(*rm_, setup);
  expect_same_as_alone(prompts, s.run(prompts, kGen), "pipelined");
  const engine::EngineStats st = s.stats();
  EXPECT_EQ(st.n_steps, kGen);
  EXPECT_EQ(st.n_pipelined_steps, kGen - 1);  // all but the prompts' step
  EXPECT_EQ(st.n_discarded_tokens, 0);        // max_tokens is known ahead: nothing past it
}

// Seeded sampling decided by the backend, pipelined: each step's draw is taken as it is planned,
// in the unpipelined order, so the tokens are those of unpipelined steps; with penalties too
// (the next step's edits count the token in flight where the backend reads it: PendingEdit).
TEST_F(EngineEquality, PipelinedSampledStepsEqualUnpipelined) {
  const auto prompts = short_prompts();
  for (const auto& [repetition, presence] :
       {std::pair{1.0f, 0.0f}, std::pair{1.3f, 0.0f}, std::pair{1.0f, 1.5f}}) {
    std::vector<Output> got[2];
    int64_t piped = 0;
    for (int pipelined = 0; pipelined < 2; ++pipelined) {
      EngineSetup setup;
      setup.temperature = 0.9f, setup.top_p = 0.9f, setup.seed = 11;
      setup.repetition_penalty = repetition, setup.presence_penalty = presence;
      setup.pipeline = pipelined == 1;
      EngineSession s(*rm_, setup);
      got[pipelined] = s.run(prompts, kGen);
      if (pipelined == 1) piped = s.stats().n_pipelined_steps;
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(got[1][i].finish, engine::FinishReason::kLength) << got[1][i].error;
      EXPECT_EQ(got[0][i].tokens, got[1][i].tokens)
          << "request #" << i << " rep " << repetition << " presence " << presence;
    }
    EXPECT_EQ(piped, kGen - 1);
  }
}

// (a') The serving path: the engine on its own thread, requests arriving 30 ms apart from another
// thread, tokens through TokenChannels. Which steps each request shares with which others now
// depends on timing; the tokens must not.
// Greedy tokens from the backend's argmax (the reference runs: logits never leave the backend)
// equal the host sampler's argmax over the copied logits, batched.
TEST_F(EngineEquality, BackendArgmaxEqualsHostSampling) {
  EngineSetup setup;
  setup.sample_on_host = true;
  EngineSession s(*rm_, setup);
  const auto prompts = short_prompts();
  expect_same_as_alone(prompts, s.run(prompts, kGen), "host sampling");
}

// Seeded temperature sampling (top-p, top-k) decided by the backend (Backend::sample: each
// step's uniform draw taken when the batch is built) equals the host sampler drawing the same
// request's numbers itself over copied logits (EngineRunner::set_sample_on_host), batched; so do
// penalized requests (Backend::adjust_logits first), sampled and greedy. On the CPU backend the
// ops are the host sampler's own code, so the tokens must be identical.
TEST_F(EngineEquality, BackendSamplingEqualsHostSampling) {
  const auto prompts = short_prompts();
  struct Case {
    float temperature, top_p;
    int top_k;
    float repetition, presence;
  };
  for (const Case& c : std::vector<Case>{{0.9f, 0.9f, 0, 1.0f, 0.0f},
                                         {0.9f, 1.0f, 40, 1.0f, 0.0f},
                                         {0.9f, 1.0f, 0, 1.0f, 0.0f},
                                         {0.9f, 0.95f, 0, 1.3f, 0.5f},
                                         {0.0f, 1.0f, 0, 1.5f, 0.0f}}) {
    const float top_p = c.top_p;
    std::vector<Output> got[2];
    for (int host = 0; host < 2; ++host) {
      EngineSetup setup;
      setup.temperature = c.temperature, setup.top_p = c.top_p, setup.top_k = c.top_k;
      setup.seed = 42, setup.repetition_penalty = c.repetition, setup.presence_penalty = c.presence;
      setup.sample_on_host = host == 1;
      EngineSession s(*rm_, setup);
      got[host] = s.run(prompts, kGen);
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(got[0][i].finish, engine::FinishReason::kLength) << got[0][i].error;
      EXPECT_EQ(got[0][i].tokens, got[1][i].tokens) << "request #" << i << " top_p " << top_p;
    }
  }
}

// Logprobs taken by the backend beside its draw (Backend::logprobs: the token's and the top 5,
// 4 bytes a value back instead of the vocabulary row) equal the host's over copied logits, for
// greedy and sampled requests, pipelined too, and with a repetition penalty (the backend's edits
// then apply to a copy: logprobs are of the raw rows). On the CPU backend both are
// core/sampling.h's row_logprobs over the same row: the same bits.
TEST_F(EngineEquality, BackendLogprobsEqualHostLogprobs) {
  const auto prompts = short_prompts();
  for (const auto& [temperature, repetition] : {std::pair{0.0f, 1.0f}, std::pair{0.9f, 1.0f},
                                                std::pair{0.9f, 1.3f}, std::pair{0.0f, 1.3f}}) {
    std::vector<Output> got[2];
    for (int host = 0; host < 2; ++host) {
      EngineSetup setup;
      setup.temperature = temperature, setup.top_p = 0.95f, setup.seed = 5;
      setup.repetition_penalty = repetition;
      setup.logprobs = true, setup.top_logprobs = 5;
      setup.sample_on_host = host == 1;
      setup.pipeline = host == 0;
      EngineSession s(*rm_, setup);
      got[host] = s.run(prompts, kGen);
      if (host == 0) {
        EXPECT_GT(s.stats().n_pipelined_steps, 0);
      }
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      const Output &dev = got[0][i], &ref = got[1][i];
      SCOPED_TRACE(::testing::Message() << "request #" << i << " temperature " << temperature
                                        << " repetition " << repetition);
      EXPECT_EQ(dev.finish, engine::FinishReason::kLength) << dev.error;
      EXPECT_EQ(dev.tokens, ref.tokens);
      EXPECT_EQ(dev.logprobs, ref.logprobs);
      ASSERT_EQ(dev.top_logprobs.size(), ref.top_logprobs.size());
      for (size_t t = 0; t < ref.top_logprobs.size(); ++t) {
        ASSERT_EQ(dev.top_logprobs[t].size(), 5u);
        ASSERT_EQ(ref.top_logprobs[t].size(), 5u);
        for (size_t j = 0; j < 5; ++j) {
          EXPECT_EQ(dev.top_logprobs[t][j].token, ref.top_logprobs[t][j].token);
          EXPECT_EQ(dev.top_logprobs[t][j].logprob, ref.top_logprobs[t][j].logprob);
        }
        // The token's own logprob is at most the best one's (a sanity check of the pairing).
        EXPECT_LE(dev.logprobs[t], dev.top_logprobs[t][0].logprob);
      }
    }
  }
}

TEST_F(EngineEquality, EngineThreadWithStaggeredArrivals) {
  const auto prompts = short_prompts();
  for (const auto& p : prompts) alone(p);
  auto runner = std::make_unique<model::EngineRunner>(*rm_->model);
  engine::Engine eng(make_engine_config(EngineSetup{}, rm_->model->config().kv_block_size),
                     *runner);
  eng.start();
  std::vector<std::shared_ptr<engine::TokenChannel>> channels;
  for (const auto& p : prompts) {
    auto ch = engine::TokenChannel::create();
    engine::GenerateRequest r = greedy_request(p, kGen);
    r.on_event = ch->callback();
    ASSERT_TRUE(eng.submit(std::move(r)).ok());
    channels.push_back(ch);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<TokenId> got;
    engine::TokenEvent ev;
    while (channels[i]->pop(&ev, std::chrono::seconds(120))) {
      if (ev.token >= 0) got.push_back(ev.token);
      if (ev.finish != engine::FinishReason::kNone) break;
    }
    EXPECT_EQ(ev.finish, engine::FinishReason::kLength) << "request #" << i << ": " << ev.error;
    EXPECT_EQ(got, alone(prompts[i])) << "request #" << i;
  }
  eng.stop();
  std::printf(
      "[ compared ] %zu requests arriving 30 ms apart at the engine thread, %d tokens "
      "each: threaded == alone (%lld steps)\n",
      prompts.size(), kGen, static_cast<long long>(eng.stats().n_steps));
}

// (b) The same prompt twice in one engine: the second run takes the prompt's full blocks from
// the prefix cache, computes only the rest, and generates the same tokens.
TEST_F(EngineEquality, WarmPrefixCacheEqualsCold) {
  const std::vector<TokenId> prompt = encode(long_text());
  const int n = static_cast<int>(prompt.size());
  ASSERT_GT(n, 150);
  EngineSession s(*rm_, EngineSetup{});
  std::vector<Output> cold = s.run({prompt}, kGen);
  const engine::EngineStats after_cold = s.stats();
  std::vector<Output> warm = s.run({prompt}, kGen);
  const engine::EngineStats after_warm = s.stats();

  const int bs = rm_->model->config().kv_block_size;
  // The cache holds whole blocks only and always leaves the last prompt token to compute (its
  // logits are needed), so the hit is the full blocks of the first n - 1 tokens.
  const int expect_cached = (n - 1) / bs * bs;
  EXPECT_EQ(cold[0].usage.n_cached_prompt_tokens, 0);
  EXPECT_EQ(warm[0].usage.n_cached_prompt_tokens, expect_cached);
  // The model computed the uncached prompt suffix, then one token per decode step after the first.
  EXPECT_EQ(after_warm.n_computed_tokens - after_cold.n_computed_tokens,
            n - expect_cached + kGen - 1);
  EXPECT_EQ(after_cold.n_computed_tokens, n + kGen - 1);
  EXPECT_EQ(cold[0].tokens, alone(prompt));
  EXPECT_EQ(warm[0].tokens, cold[0].tokens);
  std::printf(
      "[ compared ] 1 request, %d prompt tokens, %d tokens: cold == warm (warm: %d "
      "cached, %lld computed)\n",
      n, kGen, warm[0].usage.n_cached_prompt_tokens,
      static_cast<long long>(after_warm.n_computed_tokens - after_cold.n_computed_tokens));
}

// (b') A second turn: prompt = first prompt + its generated tokens + a new question. The warm
// engine reuses blocks whose KV was written during decode (generated tokens), not only prompt
// blocks; the answer must equal the cold one.
TEST_F(EngineEquality, SecondTurnReusesGeneratedBlocks) {
  const std::vector<TokenId> p1 = encode(short_texts()[7]);
  EngineSession warm(*rm_, EngineSetup{});
  std::vector<Output> t1 = warm.run({p1}, kGen);
  std::vector<TokenId> p2 = p1;
  p2.insert(p2.end(), t1[0].tokens.begin(), t1[0].tokens.end());
  const std::vector<TokenId> q = encode(" Now explain it to a child:");
  p2.insert(p2.end(), q.begin(), q.end());
  std::vector<Output> t2 = warm.run({p2}, kGen);

  const int bs = rm_->model->config().kv_block_size;
  // Turn 1 wrote KV for all its tokens but the last generated one (never fed back), and the
  // cache keeps whole blocks of those.
  const int n_written = static_cast<int>(p1.size()) + kGen - 1;
  EXPECT_EQ(t2[0].usage.n_cached_prompt_tokens, n_written / bs * bs);
  EXPECT_GT(n_written / bs * bs, static_cast<int>(p1.size()) / bs * bs)
      << "the hit must include a block holding generated tokens";
  EXPECT_EQ(t2[0].tokens, alone(p2));
  std::printf(
      "[ compared ] turn 2 (%zu prompt tokens, %d from the cache, incl. turn 1's "
      "generated tokens), %d tokens: warm == cold\n",
      p2.size(), t2[0].usage.n_cached_prompt_tokens, kGen);
}

// (b3) Speculative decoding with prompt-lookup drafts: a prompt the model copies from (code to
// repeat) gives drafts that the real model accepts; the tokens are those of plain decoding
// (rule 7: a draft row's logits equal a decode step's), in fewer steps.
TEST_F(EngineEquality, SpeculativeDecodingIsExactAndSavesSteps) {
  const std::string code =
      "def area(w, h):\n    return w * h\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n";
  const std::vector<TokenId> prompt =
      encode("Copy this code exactly.\n\n" + code + "\nCopy:\n\n" + code.substr(0, 20));
  auto run = [&](int spec) {
    EngineSetup setup;
    setup.spec_draft = spec;
    EngineSession s(*rm_, setup);
    std::vector<Output> out = s.run({prompt}, 48);
    return std::make_pair(out[0], s.stats());
  };
  const auto [plain, plain_st] = run(0);
  const auto [spec, spec_st] = run(4);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_EQ(spec.tokens.size(), 48u);
  EXPECT_EQ(plain_st.n_draft_tokens, 0);
  EXPECT_GT(spec_st.n_accepted_draft_tokens, 8) << "the copy should accept drafts";
  EXPECT_LT(spec_st.n_steps, plain_st.n_steps);
  std::printf(
      "[ compared ] speculative decoding: %lld drafts, %lld accepted, %lld vs %lld steps, "
      "tokens equal\n",
      static_cast<long long>(spec_st.n_draft_tokens),
      static_cast<long long>(spec_st.n_accepted_draft_tokens),
      static_cast<long long>(spec_st.n_steps), static_cast<long long>(plain_st.n_steps));
}

// (b'') Sharing with a sequence that is still running: A's first two 64-token chunks are in the
// cache when B (same prompt) and C (same first 100 tokens, another ending) arrive; they adopt
// A's blocks (ref count 2-3) while A keeps computing and decoding. B waits until A has computed
// the rest of their common prompt (Scheduler::defer_for_shared_prefix), C's fork is cached
// already.
TEST_F(EngineEquality, PrefixSharedWithRunningSequence) {
  const std::vector<TokenId> a = encode(long_text());
  std::vector<TokenId> c(a.begin(), a.begin() + 100);
  const std::vector<TokenId> tail = encode(" In short, the future of computing is");
  c.insert(c.end(), tail.begin(), tail.end());
  EngineSetup setup;
  setup.prefill_chunk_tokens = 64;
  EngineSession s(*rm_, setup);
  auto out_a = s.submit(a, kGen);
  s.engine().step();
  s.engine().step();  // A has computed (and the cache holds) 128 tokens = 8 blocks
  auto out_b = s.submit(a, kGen);
  auto out_c = s.submit(c, kGen);
  s.engine().run_until_idle();
  const int bs = rm_->model->config().kv_block_size;
  EXPECT_EQ(out_b->usage.n_cached_prompt_tokens, static_cast<int>(a.size() - 1) / bs * bs);
  EXPECT_GT(out_b->usage.n_cached_prompt_tokens, 128);
  EXPECT_EQ(out_c->usage.n_cached_prompt_tokens, 100 / bs * bs);  // blocks before the fork
  EXPECT_EQ(out_a->tokens, alone(a));
  EXPECT_EQ(out_b->tokens, alone(a));
  EXPECT_EQ(out_c->tokens, alone(c));
  std::printf(
      "[ compared ] 3 requests sharing a prefix with a running one (%d and %d tokens "
      "adopted), %d tokens each: shared == alone\n",
      out_b->usage.n_cached_prompt_tokens, out_c->usage.n_cached_prompt_tokens, kGen);
}

// (c) Chunked prefill: 16 and 128 tokens per step vs the whole prompt in one step.
TEST_F(EngineEquality, PrefillChunkSizesAgree) {
  const std::vector<TokenId> prompt = encode(long_text());
  const int n = static_cast<int>(prompt.size());
  ASSERT_GT(n, 128);  // so that 128 splits it too
  const std::vector<TokenId>& whole = alone(prompt);
  for (int chunk : {16, 128}) {
    EngineSetup setup;
    setup.prefill_chunk_tokens = chunk;
    EngineSession s(*rm_, setup);
    std::vector<Output> outs = s.run({prompt}, kGen);
    EXPECT_EQ(outs[0].tokens, whole) << "prefill chunk " << chunk;
    // ceil(n / chunk) prefill steps, then kGen - 1 decode steps.
    EXPECT_EQ(s.stats().n_steps, (n + chunk - 1) / chunk + kGen - 1) << "prefill chunk " << chunk;
  }
  std::printf(
      "[ compared ] 1 request, %d prompt tokens, %d tokens: prefill chunk 16 == 128 == "
      "whole prompt\n",
      n, kGen);
}

// (d) KV memory for about a third of the batch: sequences are preempted (their blocks freed)
// and recomputed later, partly from the prefix cache, and must still match.
TEST_F(EngineEquality, PreemptionKeepsGreedyOutput) {
  const auto prompts = short_prompts();
  int longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, static_cast<int>(p.size()));
  const int bs = rm_->model->config().kv_block_size;
  EngineSetup setup;
  // Room for the longest request alone (it must fit to be served at all) plus one block.
  setup.max_blocks = (longest + kGen + bs - 1) / bs + 1;
  EngineSession s(*rm_, setup);
  std::vector<Output> outs = s.run(prompts, kGen);
  expect_same_as_alone(prompts, outs, "preempted");
  const engine::EngineStats st = s.stats();
  EXPECT_GT(st.n_preemptions, 0) << "the test must force preemption";
  EXPECT_LE(st.kv_blocks_total, setup.max_blocks);
  std::printf(
      "[ compared ] %zu requests, %d tokens each, KV capped at %d blocks of %d: "
      "alone == batched with %lld preemptions\n",
      prompts.size(), kGen, setup.max_blocks, bs, static_cast<long long>(st.n_preemptions));
}

// The step-time counters the scheduler-overhead benchmark reads add up.
TEST_F(EngineEquality, StepTimeCountersAddUp) {
  EngineSession s(*rm_, EngineSetup{});
  s.run({encode(short_texts()[0])}, 4);
  const engine::EngineStats st = s.stats();
  EXPECT_GT(st.total_model_ms, 0.0);
  EXPECT_GT(st.total_schedule_ms, 0.0);
  EXPECT_GT(st.total_postprocess_ms, 0.0);
  // The parts are disjoint intervals of each step.
  EXPECT_LE(st.total_schedule_ms + st.total_model_ms + st.total_postprocess_ms,
            st.total_step_ms * (1 + 1e-9));
}

}  // namespace
}  // namespace t9::integration
