// Model loading, input validation and scratch management. The per-layer math is in forward.cpp.
#include "model/model.h"

#include <algorithm>
#include <utility>

#include "model/scratch.h"

namespace t9::model {

Model::Model(gguf::GgufFile file, Backend& backend, const ModelConfig& cfg, HParams hp,
             ArchSpec spec)
    : file_(std::move(file)),
      backend_(backend),
      cfg_(cfg),
      hp_(std::move(hp)),
      spec_(std::move(spec)),
      kv_(backend, KvPoolConfig{spec_.n_kv_layers, hp_.n_head_kv, hp_.head_dim, cfg.kv_block_size,
                                cfg.kv_type}),
      s_(std::make_unique<Scratch>()),
      xs_(std::make_unique<ExtraScratch>()) {
  // Hybrid models: recurrent layers keep per-sequence state instead of KV.
  int n_rec = 0;
  for (const LayerSpec& l : spec_.layers) rec_index_.push_back(l.recurrent ? n_rec++ : -1);
  if (n_rec > 0) {
    RecurrentStateConfig rc;
    rc.n_layers = n_rec;
    rc.conv_rows = hp_.ssm_d_conv - 1;
    rc.conv_dim = 2 * hp_.ssm_n_group * hp_.ssm_d_state + hp_.ssm_d_inner;
    rc.n_v_heads = hp_.ssm_dt_rank;
    rc.d_k = hp_.ssm_d_state;
    rc.d_v = hp_.ssm_d_inner / hp_.ssm_dt_rank;
    rs_ = std::make_unique<RecurrentState>(backend, rc);
  }
}

Model::~Model() {
  for (Buffer*& b : check_buf_)
    if (b != nullptr) backend_.free(std::exchange(b, nullptr));
  s_->release(backend_);
  xs_->release(backend_);
  free_weights(w_, backend_);
}

Result<std::unique_ptr<Model>> Model::load(const std::string& path, Backend& backend,
                                           const ModelConfig& cfg, const LoadProgress& progress) {
  if (cfg.kv_block_size <= 0 || cfg.max_logit_rows_per_call <= 0)
    return error("model config: kv_block_size and max_logit_rows_per_call must be > 0");
  T9_ASSIGN_OR_RETURN(gguf::GgufFile file, gguf::GgufFile::open(path));
  T9_ASSIGN_OR_RETURN(HParams hp, read_hparams(file));
  T9_ASSIGN_OR_RETURN(ArchSpec spec, build_arch(hp));
  std::unique_ptr<Model> m(
      new Model(std::move(file), backend, cfg, std::move(hp), std::move(spec)));
  T9_ASSIGN_OR_RETURN(m->w_, load_weights(m->file_, m->hp_, m->spec_, backend, progress));
  return m;
}

Status Model::validate(const Batch& b, int prev_rows) const {
  const auto n_tokens = static_cast<int64_t>(b.tokens.size());
  if (n_tokens == 0 || b.seqs.empty()) return error("batch: no tokens or no sequences");
  if (!b.positions.empty() && static_cast<int64_t>(b.positions.size()) != n_tokens)
    return error("batch: {} positions for {} tokens", b.positions.size(), n_tokens);
  for (size_t i = 0; i < b.tokens.size(); ++i) {
    if (b.tokens[i] < 0 && -1 - static_cast<int64_t>(b.tokens[i]) < prev_rows) continue;
    if (b.tokens[i] < 0 || b.tokens[i] >= hp_.n_vocab)
      return error("batch: token {} at index {} is out of range [0, {}){}", b.tokens[i], i,
                   hp_.n_vocab,
                   b.tokens[i] < 0 ? fmt::format(" (the previous batch decided {} tokens on the "
                                                 "backend)",
                                                 prev_rows)
                                   : "");
  }
  int64_t expected_first = 0;
  const int bs = cfg_.kv_block_size;
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    const SeqInput& q = b.seqs[s];
    if (q.first_token != expected_first || q.n_tokens <= 0 || q.n_past < 0)
      return error("batch: sequence {} has tokens [{}, +{}) past {}: sequences must tile the batch",
                   s, q.first_token, q.n_tokens, q.n_past);
    expected_first += q.n_tokens;
    const int64_t n_ctx = static_cast<int64_t>(q.n_past) + q.n_tokens;
    const int64_t n_blocks = (n_ctx + bs - 1) / bs;
    if (static_cast<int64_t>(q.block_table.size()) < n_blocks)
      return error("batch: sequence {} needs {} blocks for {} tokens, its table has {}", s,
                   n_blocks, n_ctx, q.block_table.size());
    for (int64_t i = 0; i < n_blocks; ++i)
      if (q.block_table[i] < 0 || q.block_table[i] >= kv_.n_blocks())
        return error("batch: sequence {} block {} = {} is not a backed KV block (0..{})", s, i,
                     q.block_table[i], kv_.n_blocks() - 1);
    if (rs_ && !rs_->in_use(q.state_slot))
      return error("batch: sequence {} has recurrent state slot {}, which is not taken", s,
                   q.state_slot);
    if (q.snapshot != nullptr && (!rs_ || q.snapshot_after <= 0 || q.snapshot_after >= q.n_tokens))
      return error("batch: sequence {} asks for a state snapshot after {} of its {} tokens", s,
                   q.snapshot_after, q.n_tokens);
    for (size_t s2 = 0; rs_ && s2 < s; ++s2)
      if (b.seqs[s2].state_slot == q.state_slot)
        return error("batch: sequences {} and {} share recurrent state slot {}", s2, s,
                     q.state_slot);
  }
  if (expected_first != n_tokens)
    return error("batch: sequences cover {} of {} tokens", expected_first, n_tokens);
  // The edits' order is what the backends' adjust_logits reads them by (the CUDA kernel finds a
  // pending token's edit by binary search).
  for (size_t i = 1; i < b.edits.size(); ++i)
    if (std::pair(b.edits[i - 1].row, b.edits[i - 1].token) >=
        std::pair(b.edits[i].row, b.edits[i].token))
      return error("batch: edits {} and {} are not in (row, token) order", i - 1, i);
  for (size_t i = 0; i < b.pending.size(); ++i) {
    const PendingEdit& p = b.pending[i];
    if (p.row < 0 || p.input < 0 || p.input >= n_tokens || (i > 0 && b.pending[i - 1].row >= p.row))
      return error("batch: pending edit {} (row {}, input {}) is out of range or order", i, p.row,
                   p.input);
  }
  return {};
}

void Model::upload_inputs(const Batch& b, const std::vector<int32_t>& positions) {
  std::vector<AttnSeq> seqs;
  std::vector<int32_t> tables;
  const int bs = cfg_.kv_block_size;
  for (const SeqInput& q : b.seqs) {
    seqs.push_back({q.first_token, q.n_tokens, q.n_past, static_cast<int32_t>(tables.size())});
    const size_t n_blocks = (static_cast<size_t>(q.n_past) + q.n_tokens + bs - 1) / bs;
    tables.insert(tables.end(), q.block_table.begin(), q.block_table.begin() + n_blocks);
  }
  tables.resize(static_cast<size_t>(s_->tables.n_elements()), 0);  // the padding (forward())
  backend_.upload(s_->buf, s_->ids.offset, b.tokens.data(), b.tokens.size() * 4);
  backend_.upload(s_->buf, s_->pos.offset, positions.data(), positions.size() * 4);
  backend_.upload(s_->buf, s_->seqs.offset, seqs.data(), seqs.size() * sizeof(AttnSeq));
  backend_.upload(s_->buf, s_->tables.offset, tables.data(), tables.size() * 4);
}

Result<Logits> Model::forward(const Batch& b) {
  T9_TRY(enqueue(b));
  backend_.sync();  // (delivers any batch enqueued before too; those stay for their wait())
  Logits out = std::move(in_flight_.back());
  in_flight_.pop_back();
  const PendingCheck pc = std::move(checks_in_flight_.back());
  checks_in_flight_.pop_back();
  finish_check(out, pc.accepts, pc.slot);
  return out;
}

void Model::finish_check(Logits& out, const std::function<bool(int, int32_t)>& accepts, int slot) {
  if (slot < 0) return;
  bool fetch = false;
  const size_t row_floats = static_cast<size_t>(hp_.n_vocab);
  for (int r = 0; r < out.n_rows; ++r) {
    int32_t& t = out.tokens[static_cast<size_t>(r)];
    if (t >= 0 && accepts && !accepts(r, t)) t = -1;
    if (t != -1) continue;
    if (out.data.empty()) out.data.resize(static_cast<size_t>(out.n_rows) * row_floats);
    backend_.download(check_buf_[slot], static_cast<size_t>(r) * row_floats * sizeof(float),
                      out.data.data() + static_cast<size_t>(r) * row_floats,
                      row_floats * sizeof(float));
    fetch = true;
  }
  if (fetch) backend_.sync();  // (rare: a refused or undecided row; waits for later work too)
}

bool Model::settles(const Batch& b) const {
  return std::all_of(b.sampling.begin(), b.sampling.end(),
                     [this](const RowSampling& s) { return backend_.settles(s); });
}

Result<Logits> Model::wait() {
  if (in_flight_.empty()) return error("Model::wait() without an enqueued batch");
  backend_.wait_submitted();
  Logits out = std::move(in_flight_.front());
  in_flight_.pop_front();
  const PendingCheck pc = std::move(checks_in_flight_.front());
  checks_in_flight_.pop_front();
  finish_check(out, pc.accepts, pc.slot);
  return out;
}

Status Model::enqueue(const Batch& b) {
  // The previous batch's tokens are this batch's to read; a failure below leaves none to read.
  const int prev_rows = std::exchange(prev_token_rows_, 0);
  T9_TRY(validate(b, prev_rows));
  const int n_tokens = static_cast<int>(b.tokens.size());
  const int n_seqs = static_cast<int>(b.seqs.size());
  std::vector<int32_t> positions(b.positions.begin(), b.positions.end());
  int max_ctx = 0, n_block_ids = 0;
  for (const SeqInput& q : b.seqs) {
    max_ctx = std::max(max_ctx, q.n_past + q.n_tokens);
    n_block_ids += (q.n_past + q.n_tokens + cfg_.kv_block_size - 1) / cfg_.kv_block_size;
    if (b.positions.empty())
      for (int j = 0; j < q.n_tokens; ++j) positions.push_back(q.n_past + j);
  }
  // The block-table tensor is padded to whole kTableQuantum entries, so that consecutive decode
  // steps have the same shapes and copy sizes for up to kTableQuantum * kv_block_size tokens: a
  // backend may then replay the step's recorded work (CUDA graphs, cuda_stream.cuh).
  constexpr int kTableQuantum = 64;
  n_block_ids = (n_block_ids + kTableQuantum - 1) / kTableQuantum * kTableQuantum;
  T9_TRY(s_->reserve(backend_, hp_, cfg_, n_tokens, n_seqs, n_block_ids));
  s_->shape(n_tokens, n_seqs, n_block_ids);
  upload_inputs(b, positions);
  if (std::any_of(b.tokens.begin(), b.tokens.end(), [](int32_t t) { return t < 0; })) {
    const Tensor prev = make_tensor(s_->logit_buf, s_->row_max.offset, GgmlType::I32,
                                    static_cast<int64_t>(prev_rows));
    backend_.take_tokens(prev, s_->ids);
  }
  if (rs_ || spec_.moe || spec_.gated_attn) {
    T9_TRY(xs_->reserve(backend_, hp_, spec_, n_tokens, n_seqs));
    if (rs_) T9_TRY(upload_recurrent_seqs(b));
  }

  backend_.get_rows(w_.token_embd, s_->ids, s_->x);
  if (spec_.embd_scale != 1.0f) backend_.scale(s_->x, spec_.embd_scale, s_->x);
  for (int il = 0; il < hp_.n_layer_main(); ++il) run_layer(il, n_tokens, n_seqs, max_ctx);
  if (rs_)
    for (const SeqInput& q : b.seqs) rs_->set_fresh(q.state_slot, false);
  int check_slot = -1;
  T9_ASSIGN_OR_RETURN(Logits out, compute_logits(b, &check_slot));
  // The token of every row sits in row_max until the next batch's own: the next batch may read
  // it there, when every row was decided on the backend (an argmax, or a draw that settles) and
  // none checked before this returned (a refused row's token is then the host's, not row_max's;
  // checked at wait, the caller drops the row that read a refused one).
  if ((b.argmax_only || (!b.sampling.empty() && settles(b))) && (!b.accepts || b.check_at_wait) &&
      out.n_rows <= cfg_.max_logit_rows_per_call)
    prev_token_rows_ = out.n_rows;
  in_flight_.push_back(std::move(out));
  checks_in_flight_.push_back({check_slot >= 0 ? b.accepts : nullptr, check_slot});
  return {};
}

// A sequence with a snapshot inside the step runs its first snapshot_after rows in rseqs and the
// rest in the tail (gated_deltanet: the state is copied in between); the delta rule and the conv
// run token by token, so the two calls leave the one call's bits.
Status Model::upload_recurrent_seqs(const Batch& b) {
  std::vector<RecurrentSeq> rs, tail;
  mid_snaps_.clear();
  for (const SeqInput& q : b.seqs) {
    // A sequence with no history starts from zero whatever the slot held before.
    const bool reset = rs_->fresh(q.state_slot) || q.n_past == 0;
    const int head = q.snapshot != nullptr ? q.snapshot_after : q.n_tokens;
    rs.push_back({q.first_token, head, q.state_slot, reset ? 1 : 0});
    if (head == q.n_tokens) continue;
    T9_TRY(rs_->prepare_snapshot(*q.snapshot));
    tail.push_back({q.first_token + head, q.n_tokens - head, q.state_slot, 0});
    mid_snaps_.emplace_back(q.state_slot, q.snapshot);
  }
  backend_.upload(xs_->rseqs.buf, xs_->rseqs.offset, rs.data(), rs.size() * sizeof(RecurrentSeq));
  gdn_tail_ = Tensor{};
  if (!tail.empty()) {
    gdn_tail_ = make_tensor(xs_->rseqs_tail.buf, xs_->rseqs_tail.offset, GgmlType::I32, 4,
                            static_cast<int64_t>(tail.size()));
    backend_.upload(gdn_tail_.buf, gdn_tail_.offset, tail.data(),
                    tail.size() * sizeof(RecurrentSeq));
  }
  return {};
}

}  // namespace t9::model
