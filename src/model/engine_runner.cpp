#include "model/engine_runner.h"

namespace t9::model {

Result<engine::ForwardOutput> EngineRunner::run(const engine::ForwardBatch& batch) {
  if (batch.block_size != model_.config().kv_block_size)
    return error("engine block size {} != model KV block size {}", batch.block_size,
                 model_.config().kv_block_size);
  seqs_.clear();
  for (const engine::ForwardSeq& s : batch.seqs) {
    SeqInput q;
    q.first_token = s.first_token;
    q.n_tokens = s.n_tokens;
    q.n_past = s.n_past;
    q.block_table = s.block_table;
    q.logits = s.need_logits ? LogitRows::kLast : LogitRows::kNone;
    seqs_.push_back(q);
  }
  Batch b;
  b.tokens = batch.tokens;
  b.positions = batch.positions;
  b.seqs = seqs_;
  T9_ASSIGN_OR_RETURN(Logits lg, model_.forward(b));
  engine::ForwardOutput out;
  out.logits = std::move(lg.data);
  out.n_rows = lg.n_rows;
  out.n_vocab = lg.n_vocab;
  return out;
}

bool EngineRunner::grow_kv_blocks(int n_blocks_total) {
  return model_.kv().reserve(n_blocks_total).ok();
}

}  // namespace t9::model
