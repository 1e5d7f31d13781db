// The CUDA attention tests' cases (cuda_attention_test.cpp, cuda_attention_row_test.cpp):
// sequences over a shuffled paged pool, their random K/V/q, one call of write_kv then
// (gated_)attention on a backend, and the dense double-precision reference with its error
// budget.
#pragma once
#ifdef TEMPO9_HAVE_CUDA

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "ops_test_util.h"

namespace t9::test {

struct Seq {
  int n_past, n_q;
};

struct Case {
  AttnParams p;
  std::vector<Seq> seqs;
  GgmlType cache;
};

struct Data {
  std::vector<float> k, v,
      q;  // k, v: [n_ctx_rows, n_kv, hd] of every sequence; q: [rows, n_head, hd]
  std::vector<int32_t> tables;
  std::vector<AttnSeq> write_meta, attn_meta;
  int kv_rows = 0, q_rows = 0;
};

constexpr int kPoolBlocks = 256;  // 4096 slots: SharedPrefixDecodeRowsEqualAlone needs 203 blocks

struct Result2 {
  std::vector<float> out;
  std::vector<uint8_t> kpool, vpool;
};

// The sequences' block tables over a shuffled pool of kPoolBlocks, random K/V in [-1, 1] and
// queries in [-3, 3].
Data make_data(std::mt19937_64& rng, const Case& c);
std::vector<int32_t> as_ints(const std::vector<AttnSeq>& m);
// write_kv of every sequence's rows into poisoned pools, then attention (gated_attention with
// this [rows, n_head, head_dim] gate when gate is not null): the output and both pools.
Result2 run(Backend& be, const Case& c, const Data& d, const std::vector<float>* gate = nullptr);
// got against the double reference over the cache-rounded K/V, within the error budget
// (cuda_attention_case.cpp says how it is reckoned).
void check_vs_dense(const Case& c, const Data& d, const std::vector<float>& got);
// 8 q heads over 2 KV heads of head_dim, blocks of 16 keys; four sequences mixing chunked
// prefill, a fresh prompt and decode rows (contexts up to 201 keys).
Case base(GgmlType cache, int head_dim);
// Rows [first, first + n) of sequence si of (c, d) as a batch of their own over the same pool
// contents: its K/V rows up to the last query, the same block table.
std::pair<Case, Data> sub_batch(const Case& c, const Data& d, size_t si, int first, int n);
// F16 pools of blocks of 32 keys (8192 keys in the pool of 256 blocks) for these sequences,
// max_ctx their longest context.
Case case_of(int head_dim, const std::vector<Seq>& seqs, int window);

}  // namespace t9::test

#endif  // TEMPO9_HAVE_CUDA
