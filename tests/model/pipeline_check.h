// A check shared by the CPU (tests/model) and CUDA (tests/ops) suites: pipelined decode steps
// (Model::enqueue / wait, Backend::submit) give the tokens of plain forward() steps. Two
// sequences decode greedily for n_steps after their prompts, once with forward() and the tokens
// passed on the host, and once on the twin model (same file, same backend) with each step
// enqueued and submitted before the previous one is waited for, its input ids named as the
// previous step's argmax rows (-1 - row, read on the backend). On CUDA the second form records
// each step while the one before runs, in the other staging buffer.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "model/model.h"

namespace t9::testing {

inline void check_pipelined_decode(model::Model& plain, model::Model& piped,
                                   const std::vector<int32_t>& prompt_a,
                                   const std::vector<int32_t>& prompt_b, int n_steps) {
  using model::Batch;
  using model::LogitRows;
  using model::SeqInput;
  const int bs = plain.config().kv_block_size;
  const int la = static_cast<int>(prompt_a.size()), lb = static_cast<int>(prompt_b.size());
  const int blocks_a = (la + n_steps + bs - 1) / bs, blocks_b = (lb + n_steps + bs - 1) / bs;
  std::vector<int32_t> ta, tb;
  for (int i = 0; i < blocks_a; ++i) ta.push_back(i);
  for (int i = 0; i < blocks_b; ++i) tb.push_back(blocks_a + i);
  std::vector<int32_t> prompts(prompt_a);
  prompts.insert(prompts.end(), prompt_b.begin(), prompt_b.end());

  std::vector<std::vector<int32_t>> got;  // per model: the tokens of every step, a then b
  for (model::Model* m : {&plain, &piped}) {
    ASSERT_TRUE(m->kv().reserve(blocks_a + blocks_b).ok());
    int slot_a = -1, slot_b = -1;
    if (m->recurrent() != nullptr) {
      auto sa = m->recurrent()->acquire(), sb = m->recurrent()->acquire();
      ASSERT_TRUE(sa.ok() && sb.ok());
      slot_a = *sa;
      slot_b = *sb;
    }
    // Step k's sequences: the prompts at k = 0, then one token each at n_past = prompt + k - 1.
    const auto seqs = [&](int k) {
      if (k == 0)
        return std::vector<SeqInput>{{0, la, 0, ta, LogitRows::kLast, slot_a},
                                     {la, lb, 0, tb, LogitRows::kLast, slot_b}};
      return std::vector<SeqInput>{{0, 1, la + k - 1, ta, LogitRows::kLast, slot_a},
                                   {1, 1, lb + k - 1, tb, LogitRows::kLast, slot_b}};
    };
    std::vector<int32_t> out;
    if (m == &plain) {
      std::vector<int32_t> toks = prompts;
      for (int k = 0; k <= n_steps; ++k) {
        const std::vector<SeqInput> s = seqs(k);
        Batch b{toks, {}, s};
        b.argmax_only = true;
        auto r = m->forward(b);
        ASSERT_TRUE(r.ok()) << "step " << k << ": " << r.message();
        ASSERT_EQ(r->tokens.size(), 2u);
        out.insert(out.end(), r->tokens.begin(), r->tokens.end());
        toks = r->tokens;
      }
    } else {
      const std::vector<int32_t> from_prev{-1, -2};
      for (int k = 0; k <= n_steps + 1; ++k) {
        if (k <= n_steps) {  // enqueue step k, then wait for step k - 1
          const std::vector<SeqInput> s = seqs(k);
          Batch b{k == 0 ? prompts : from_prev, {}, s};
          b.argmax_only = true;
          const Status st = m->enqueue(b);
          ASSERT_TRUE(st.ok()) << "step " << k << ": " << st.message();
          m->backend().submit();
        }
        if (k == 0) continue;
        auto r = m->wait();
        ASSERT_TRUE(r.ok()) << "step " << k - 1 << ": " << r.message();
        ASSERT_EQ(r->tokens.size(), 2u);
        out.insert(out.end(), r->tokens.begin(), r->tokens.end());
      }
    }
    got.push_back(out);
  }
  EXPECT_EQ(got[0], got[1]);
}

}  // namespace t9::testing
