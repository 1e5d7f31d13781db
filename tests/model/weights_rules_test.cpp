// The loader's layout rules (model/weights.h): which matrices it keeps in the file's layout
// although only matmuls read them.
#include "model/weights.h"

#include <gtest/gtest.h>

namespace t9::model {
namespace {

// The shared expert's gate and up ride in the routed experts' launch; everything else a matmul
// reads may take the backend's layout: the shared expert's down projection, its router scalar
// (ffn_gate_inp_shexp, Qwen3.5-MoE), the routed experts, the dense FFN.
TEST(WeightsRules, OnlyTheSharedExpertsGateAndUpRideWithTheExperts) {
  EXPECT_TRUE(rides_with_experts("blk.3.ffn_gate_shexp.weight"));
  EXPECT_TRUE(rides_with_experts("blk.39.ffn_up_shexp.weight"));
  EXPECT_FALSE(rides_with_experts("blk.3.ffn_down_shexp.weight"));
  EXPECT_FALSE(rides_with_experts("blk.3.ffn_gate_inp_shexp.weight"));
  EXPECT_FALSE(rides_with_experts("blk.3.ffn_gate_exps.weight"));
  EXPECT_FALSE(rides_with_experts("blk.3.ffn_gate.weight"));
  EXPECT_FALSE(rides_with_experts("blk.3.ffn_up.weight"));
  EXPECT_FALSE(rides_with_experts("output.weight"));
}

}  // namespace
}  // namespace t9::model
