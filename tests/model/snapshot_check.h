// A check shared by the CPU (tests/model) and CUDA (tests/ops) suites: a state snapshot taken
// inside a step (SeqInput::snapshot_after, the engine's mid-step checkpoint) is the state a step
// ending there leaves. Model a computes 37 tokens in one step, copying the state after 32; its
// twin b (same file, same backend) computes 32, snapshots, then 5. Same logits, bitwise; and
// restoring either snapshot and recomputing the last 5 tokens gives those logits again.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "model/model.h"

namespace t9::testing {

inline void check_snapshot_inside_step(model::Model& a, model::Model& b,
                                       const std::vector<int32_t>& toks) {
  using model::Batch;
  using model::LogitRows;
  using model::SeqInput;
  const auto float_bits = [](float f) { return std::bit_cast<uint32_t>(f); };
  constexpr int kN = 37, kAt = 32;
  ASSERT_EQ(toks.size(), static_cast<size_t>(kN));

  const int bs = a.config().kv_block_size;
  std::vector<int32_t> table;
  for (int i = 0; i < (kN + bs - 1) / bs; ++i) table.push_back(i);
  for (model::Model* m : {&a, &b})
    ASSERT_TRUE(m->kv().reserve(static_cast<int>(table.size())).ok());
  const std::span<const int32_t> head(toks.data(), kAt), tail(toks.data() + kAt, kN - kAt);
  model::StateSnapshot snap_a, snap_b;

  auto slot_a = a.recurrent()->acquire();
  ASSERT_TRUE(slot_a.ok());
  SeqInput qa{0, kN, 0, table, LogitRows::kLast, *slot_a, kAt, &snap_a};
  auto la = a.forward(Batch{toks, {}, std::span(&qa, 1)});
  ASSERT_TRUE(la.ok()) << la.message();

  auto slot_b = b.recurrent()->acquire();
  ASSERT_TRUE(slot_b.ok());
  SeqInput qb{0, kAt, 0, table, LogitRows::kLast, *slot_b};
  ASSERT_TRUE(b.forward(Batch{head, {}, std::span(&qb, 1)}).ok());
  ASSERT_TRUE(b.recurrent()->snapshot(*slot_b, snap_b).ok());
  SeqInput qb2{0, kN - kAt, kAt, table, LogitRows::kLast, *slot_b};
  auto lb = b.forward(Batch{tail, {}, std::span(&qb2, 1)});
  ASSERT_TRUE(lb.ok()) << lb.message();
  ASSERT_EQ(la->data.size(), lb->data.size());
  for (size_t i = 0; i < la->data.size(); ++i)
    ASSERT_EQ(float_bits(la->data[i]), float_bits(lb->data[i])) << "logit " << i;

  // Back to the state after 32 tokens, from either snapshot: the last 5 tokens again.
  for (auto [m, slot, snap] :
       {std::tuple{&a, *slot_a, &snap_a}, std::tuple{&b, *slot_b, &snap_b}}) {
    ASSERT_TRUE(m->recurrent()->restore(slot, *snap).ok());
    SeqInput q{0, kN - kAt, kAt, table, LogitRows::kLast, slot};
    auto again = m->forward(Batch{tail, {}, std::span(&q, 1)});
    ASSERT_TRUE(again.ok()) << again.message();
    for (size_t i = 0; i < la->data.size(); ++i)
      ASSERT_EQ(float_bits(again->data[i]), float_bits(la->data[i])) << "logit " << i;
  }
  // A snapshot at the step's end or start is the engine's other path: refused here.
  SeqInput bad{0, kN - kAt, kAt, table, LogitRows::kLast, *slot_a, kN - kAt, &snap_a};
  auto r = a.forward(Batch{tail, {}, std::span(&bad, 1)});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("state snapshot after 5 of its 5 tokens"), std::string::npos)
      << r.message();
  a.recurrent()->release(*slot_a);
  b.recurrent()->release(*slot_b);
}

}  // namespace t9::testing
