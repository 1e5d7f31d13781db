// FakeModelRunner: a ModelRunner for engine tests whose output depends on the KV it READS BACK.
// run() writes each batch token id into a fake KV array at (block_table[pos / bs], pos % bs);
// logits for a sequence come from the token history read back through its block table. So any
// bookkeeping bug (wrong block, stale eviction, bad prefix hit, wrong position) changes the
// output, and reference_logits() — the same function on the history given directly, no KV —
// is the oracle tests compare against.
//
// With `recurrent` set it also plays a hybrid model: each sequence carries a recurrent state (a
// hash chain over every token it computed, in order, and their count), restarted at n_past == 0,
// loaded from / saved to checkpoints as ForwardSeq asks. Before a sequence's logits the state
// must equal the hash chain of the token history read back from the KV, else run() fails: a
// checkpoint restored at the wrong position or for other tokens cannot go unnoticed.
//
// With `deferred` it plays a GPU for pipelined steps: enqueue() keeps a copy of the batch and its
// block tables, and wait() computes it, so the engine's bookkeeping between the two (the next
// step planned, sequences ended) happens before the "device" writes this step's KV and state.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/sampling.h"
#include "engine/model_runner.h"

namespace t9::engine::testing {

class FakeModelRunner : public ModelRunner {
 public:
  FakeModelRunner(int n_vocab, int block_size) : n_vocab_(n_vocab), block_size_(block_size) {}

  int n_vocab() const override { return n_vocab_; }
  bool overlaps_steps() const override { return deferred; }
  bool decides(const RowSampling&) const override { return sample_when_asked && settle_all; }
  // Deferred, a batch is computed (and its rows checked) in wait(), after the engine accepted
  // the previous batch's tokens: as the model runner's check at wait.
  bool checks_when_waited() const override { return deferred; }

  void enqueue(const ForwardBatch& batch) override {
    n_enqueued++;
    for (const ForwardSeq& s : batch.seqs) n_token_from_row += s.token_from_row >= 0 ? 1 : 0;
    if (!deferred) return ModelRunner::enqueue(batch);
    Queued q;
    q.batch = batch;
    for (const ForwardSeq& s : batch.seqs)
      q.tables.emplace_back(s.block_table.begin(), s.block_table.end());
    queue_.push_back(std::move(q));
  }

  Result<ForwardOutput> wait() override {
    if (!deferred) return ModelRunner::wait();
    if (queue_.empty()) return error("wait() with nothing enqueued");
    Queued q = std::move(queue_.front());
    queue_.pop_front();
    for (size_t i = 0; i < q.batch.seqs.size(); ++i) {
      ForwardSeq& s = q.batch.seqs[i];
      s.block_table = q.tables[i];
      if (s.token_from_row < 0) continue;
      // The token the previous step decided for that row, as the device would copy it.
      T9_ASSIGN_OR_RETURN(q.batch.tokens[static_cast<size_t>(s.first_token)],
                          previous_token(s, last_tokens_));
      s.token_from_row = -1;
    }
    Result<ForwardOutput> out = run(q.batch);
    last_tokens_.clear();
    // The next batch reads the tokens as decided, before the check (a device's row_max): a
    // refused one's row there is stale, and the engine drops it.
    if (out.ok()) last_tokens_ = decided_tokens_;
    return out;
  }
  bool has_recurrent_state() const override { return recurrent; }
  bool supports_mid_step_checkpoints() const override { return recurrent && mid_step; }
  size_t state_checkpoint_bytes() const override { return recurrent ? sizeof(State) : 0; }
  void drop_checkpoints(std::span<const uint64_t> ids) override {
    for (uint64_t id : ids) checkpoints_.erase(id);
  }
  void release_sequence(uint64_t seq_id) override { states_.erase(seq_id); }
  // Checkpoints the runner still holds (the engine must drop every one it stops using).
  int n_checkpoints_held() const { return static_cast<int>(checkpoints_.size()); }
  int n_states_held() const { return static_cast<int>(states_.size()); }

  bool grow_kv_blocks(int n_blocks_total) override {
    grow_calls.push_back(n_blocks_total);
    if (n_blocks_total > grow_limit_blocks) return false;
    kv_.resize(static_cast<size_t>(n_blocks_total) * block_size_, -1);
    return true;
  }

  Result<ForwardOutput> run(const ForwardBatch& batch) override {
    n_runs++;
    if (fail_next_run) {
      fail_next_run = false;
      return error("injected failure");
    }
    if (batch.block_size != block_size_) return error("block size {}", batch.block_size);
    ForwardOutput out;
    out.n_vocab = n_vocab_;
    for (const ForwardSeq& s : batch.seqs) {
      T9_TRY(write_kv(batch, s));
      if (recurrent) T9_TRY(advance_state(batch, s));
      n_tokens_computed += s.n_tokens;
      if (!s.need_logits) continue;
      if (s.n_logits < 1 || s.n_logits > s.n_tokens) return error("n_logits {}", s.n_logits);
      std::vector<TokenId> history;
      T9_TRY(read_kv(s, s.n_past + s.n_tokens, &history));
      // One row per requested position: the logits after the history up to and including it.
      for (int r = s.n_tokens - s.n_logits; r < s.n_tokens; ++r) {
        out.logits.resize(out.logits.size() + n_vocab_);
        reference_logits(std::span(history).first(static_cast<size_t>(s.n_past + r + 1)), n_vocab_,
                         out.logits.data() + out.logits.size() - n_vocab_);
        out.n_rows++;
      }
    }
    // ForwardSeq::check by logit row: a decided token it refuses comes back -1 with the logits.
    decided_tokens_.clear();
    std::vector<TokenConstraint*> checks;
    for (const ForwardSeq& s : batch.seqs)
      if (s.need_logits) checks.insert(checks.end(), static_cast<size_t>(s.n_logits), s.check);
    bool any_refused = false;
    auto checked = [&](size_t r, int32_t t) {
      decided_tokens_.push_back(t);
      if (t < 0 || checks[r] == nullptr || checks[r]->allows(t)) return t;
      n_refused_checks++;
      any_refused = true;
      return -1;
    };
    if (argmax_when_asked && batch.all_argmax_only()) {  // as a GPU runner: ids, no logits
      for (int r = 0; r < out.n_rows; ++r) {
        const float* row = out.logits.data() + static_cast<size_t>(r) * n_vocab_;
        out.tokens.push_back(
            checked(static_cast<size_t>(r),
                    static_cast<int32_t>(std::max_element(row, row + n_vocab_) - row)));
      }
      if (!any_refused) out.logits.clear();
      n_argmax_runs++;
    } else if (sample_when_asked && batch.all_sampled_by_runner()) {  // as Backend::sample
      // The rows' edits (bias, penalties, tokens in flight: Backend::adjust_logits), then each
      // row's token by core/sampling.h with the row's u; every second sampled row is left
      // undecided (-1), as the device does past its candidate limit: the edited logits then
      // come back.
      const std::vector<float> raw = out.logits;  // logprobs are of the rows before the edits
      if (!apply_logit_edits(out.logits, n_vocab_, batch.edits, batch.pending, batch.tokens))
        return error("an edit out of range");
      // Logprobs as Backend::logprobs gives them: one top count for the batch, the largest asked.
      int k = -1;
      for (const ForwardSeq& s : batch.seqs)
        if (s.need_logits && s.sample_on_device) k = std::max(k, s.n_top_logprobs);
      if (omit_logprobs) k = -1;
      if (k >= 0) {
        out.n_top = k;
        out.logprob.assign(static_cast<size_t>(out.n_rows), 0.0f);
        out.top.assign(static_cast<size_t>(out.n_rows) * static_cast<size_t>(k), {});
      }
      std::vector<int32_t> ids(static_cast<size_t>(std::max(k, 0)));
      std::vector<float> lps(ids.size());
      bool any_undecided = false;
      int r = 0;
      for (const ForwardSeq& s : batch.seqs) {
        if (!s.need_logits) continue;
        for (int j = 0; j < s.n_logits; ++j, ++r) {
          const std::span<const float> row(out.logits.data() + static_cast<size_t>(r) * n_vocab_,
                                           static_cast<size_t>(n_vocab_));
          const bool leave = s.sample_on_device && !settle_all && (n_sampled_rows++ % 2 == 1);
          any_undecided = any_undecided || leave;
          out.tokens.push_back(
              leave ? checked(static_cast<size_t>(r), -1)  // (undecided: -1 either way)
                    : checked(static_cast<size_t>(r), sample_row(row, s.sampling)));
          if (k < 0) continue;
          row_logprobs(
              {raw.data() + static_cast<size_t>(r) * n_vocab_, static_cast<size_t>(n_vocab_)},
              out.tokens.back(), k, &out.logprob[static_cast<size_t>(r)], ids.data(), lps.data());
          n_logprob_rows += s.n_top_logprobs >= 0 && out.tokens.back() >= 0 ? 1 : 0;
          for (int i = 0; i < k; ++i)
            out.top[static_cast<size_t>(r * k + i)] = {ids[static_cast<size_t>(i)],
                                                       lps[static_cast<size_t>(i)]};
        }
      }
      if (!any_undecided && !any_refused) out.logits.clear();
      n_sample_runs++;
    }
    return out;
  }

  // Deterministic pseudo-random logits in [-4, 4) that depend on every token of the history.
  static void reference_logits(std::span<const TokenId> history, int n_vocab, float* out) {
    uint64_t h = 0x51ed2701u;
    for (TokenId t : history) h = mix(h ^ (static_cast<uint64_t>(t) + 0x9e37));
    for (int v = 0; v < n_vocab; ++v)
      out[v] = static_cast<float>(mix(h + static_cast<uint64_t>(v) * 0x9e3779b97f4a7c15ULL) >> 40) /
                   static_cast<float>(1 << 24) * 8.0f -
               4.0f;
  }

  // The recurrent state after a token history (what advance_state computes token by token).
  static uint64_t state_hash(std::span<const TokenId> history) {
    uint64_t h = 0x6a09e667u;
    for (TokenId t : history) h = mix(h ^ (static_cast<uint64_t>(t) * 0x2545f4914f6cdd1dULL + 1));
    return h;
  }

  static TokenId reference_greedy(std::span<const TokenId> history, int n_vocab) {
    std::vector<float> l(n_vocab);
    reference_logits(history, n_vocab, l.data());
    TokenId best = 0;
    for (int v = 1; v < n_vocab; ++v)
      if (l[v] > l[best]) best = v;
    return best;
  }

  // Greedy continuation of `prompt` for n tokens, straight from the oracle.
  static std::vector<TokenId> reference_generate(std::vector<TokenId> prompt, int n, int n_vocab) {
    std::vector<TokenId> out;
    for (int i = 0; i < n; ++i) {
      out.push_back(reference_greedy(prompt, n_vocab));
      prompt.push_back(out.back());
    }
    return out;
  }

  bool recurrent = false;           // play a hybrid model with per-sequence recurrent state
  int64_t n_restores = 0;           // checkpoints loaded (prefix hits of a recurrent model)
  int grow_limit_blocks = 1 << 30;  // grow_kv_blocks beyond this fails (out of "memory")
  bool fail_next_run = false;
  int64_t n_runs = 0;
  // Return ForwardOutput::argmax instead of the logits when the batch allows it (as the model
  // runner does: ForwardBatch::all_argmax_only), counting those runs.
  bool argmax_when_asked = false;
  int64_t n_argmax_runs = 0;
  bool sample_when_asked = false;  // decide ForwardSeq::sample_on_device rows (Backend::sample)
  bool settle_all = false;         // and every one of them (decides(): none left undecided)
  int64_t n_sample_runs = 0, n_sampled_rows = 0;
  int64_t n_logprob_rows = 0;    // decided rows whose logprobs the runner returned (asked for)
  bool omit_logprobs = false;    // a broken runner: decided rows without the logprobs asked for
  int64_t n_refused_checks = 0;  // decided tokens a ForwardSeq::check refused (sent back -1)
  // Recurrent mode: honour ForwardSeq::save_mid_checkpoint (supports_mid_step_checkpoints).
  bool mid_step = false;
  int64_t n_mid_saves = 0;
  int64_t n_tokens_computed = 0;
  std::vector<int> grow_calls;
  bool deferred = false;  // compute enqueued batches in wait() (see the top)
  int64_t n_enqueued = 0, n_token_from_row = 0;
  std::vector<int32_t> decided_tokens_;  // the last run's tokens before the check

 private:
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  Result<size_t> slot(const ForwardSeq& s, int pos) const {
    int bi = pos / block_size_;
    if (bi >= static_cast<int>(s.block_table.size()))
      return error("position {} beyond the block table ({} blocks)", pos, s.block_table.size());
    size_t idx = static_cast<size_t>(s.block_table[bi]) * block_size_ + pos % block_size_;
    if (s.block_table[bi] < 0 || idx >= kv_.size())
      return error("block {} was never grown", s.block_table[bi]);
    return idx;
  }

  Status write_kv(const ForwardBatch& b, const ForwardSeq& s) {
    for (int i = 0; i < s.n_tokens; ++i) {
      int pos = b.positions[s.first_token + i];
      if (pos != s.n_past + i) return error("position {} where {} was expected", pos, s.n_past + i);
      T9_ASSIGN_OR_RETURN(size_t idx, slot(s, pos));
      kv_[idx] = b.tokens[s.first_token + i];
    }
    return {};
  }

  struct State {
    uint64_t hash = 0;
    int n_tokens = 0;
  };

  Status advance_state(const ForwardBatch& b, const ForwardSeq& s) {
    if (s.seq_id == 0) return error("recurrent model without a seq_id");
    State st;
    if (s.restore_checkpoint != 0) {
      auto it = checkpoints_.find(s.restore_checkpoint);
      if (it == checkpoints_.end())
        return error("seq {}: restore of unknown checkpoint {}", s.seq_id, s.restore_checkpoint);
      st = it->second;
      n_restores++;
    } else if (s.n_past == 0) {
      st.hash = state_hash({});
    } else if (auto it = states_.find(s.seq_id); it != states_.end()) {
      st = it->second;
    } else {
      return error("seq {} continues at {} without a state", s.seq_id, s.n_past);
    }
    if (st.n_tokens != s.n_past)
      return error("seq {}: state after {} tokens for a step at {}", s.seq_id, st.n_tokens,
                   s.n_past);
    if (s.snapshot_before != 0) checkpoints_[s.snapshot_before] = st;
    if (s.save_mid_checkpoint != 0 &&
        (!mid_step || s.save_mid_tokens <= 0 || s.save_mid_tokens >= s.n_tokens))
      return error("seq {}: mid-step checkpoint after {} of {} tokens", s.seq_id, s.save_mid_tokens,
                   s.n_tokens);
    for (int i = 0; i < s.n_tokens; ++i) {
      const TokenId t = b.tokens[s.first_token + i];
      st.hash = mix(st.hash ^ (static_cast<uint64_t>(t) * 0x2545f4914f6cdd1dULL + 1));
      st.n_tokens++;
      if (s.save_mid_checkpoint != 0 && i + 1 == s.save_mid_tokens) {
        checkpoints_[s.save_mid_checkpoint] = st;
        n_mid_saves++;
      }
    }
    std::vector<TokenId> history;
    T9_TRY(read_kv(s, st.n_tokens, &history));
    if (st.hash != state_hash(history))
      return error("seq {}: recurrent state disagrees with the KV history", s.seq_id);
    states_[s.seq_id] = st;
    if (s.save_checkpoint != 0) checkpoints_[s.save_checkpoint] = st;
    return {};
  }

  Status read_kv(const ForwardSeq& s, int n, std::vector<TokenId>* history) const {
    for (int pos = 0; pos < n; ++pos) {
      T9_ASSIGN_OR_RETURN(size_t idx, slot(s, pos));
      if (kv_[idx] < 0) return error("position {} read from a slot never written", pos);
      history->push_back(kv_[idx]);
    }
    return {};
  }

  struct Queued {
    ForwardBatch batch;
    std::vector<std::vector<BlockId>> tables;  // the block tables as they were at enqueue()
  };
  std::deque<Queued> queue_;
  std::vector<int32_t> last_tokens_;  // the tokens of the batch computed last

  int n_vocab_;
  int block_size_;
  std::vector<TokenId> kv_;  // [n_blocks * block_size]: the token id stored in each slot
  std::unordered_map<uint64_t, State> states_;       // seq_id -> state
  std::unordered_map<uint64_t, State> checkpoints_;  // checkpoint id -> saved state
};

}  // namespace t9::engine::testing
