#include "model/kv_pool.h"

#include <algorithm>

namespace t9::model {

KvPool::KvPool(Backend& backend, const KvPoolConfig& cfg)
    : backend_(backend),
      cfg_(cfg),
      k_(static_cast<size_t>(cfg.n_layer), nullptr),
      v_(static_cast<size_t>(cfg.n_layer), nullptr) {
  T9_CHECK(cfg.n_layer > 0 && cfg.n_kv_head > 0 && cfg.head_dim > 0 && cfg.block_size > 0,
           "bad KvPoolConfig");
  T9_CHECK(cfg.type == GgmlType::F16 || cfg.type == GgmlType::F32, "KV type must be F16 or F32");
}

KvPool::~KvPool() {
  for (Buffer* b : k_)
    if (b) backend_.free(b);
  for (Buffer* b : v_)
    if (b) backend_.free(b);
}

size_t KvPool::layer_bytes(int n_blocks) const {
  return row_bytes(cfg_.type, cfg_.head_dim) * static_cast<size_t>(cfg_.n_kv_head) *
         static_cast<size_t>(cfg_.block_size) * static_cast<size_t>(n_blocks);
}

size_t KvPool::bytes_allocated() const {
  return 2 * layer_bytes(capacity_) * k_.size();
}

Tensor KvPool::view(Buffer* buf, int n_blocks) const {
  return make_tensor(buf, 0, cfg_.type, cfg_.head_dim, cfg_.n_kv_head,
                     static_cast<int64_t>(n_blocks) * cfg_.block_size);
}

// Every backed block, not only the ids handed out: the tensors' shapes then change only when the
// pool grows, so consecutive decode steps launch the same work (a backend may replay it, as CUDA
// graphs do). Block ids past n_blocks() are refused before any op sees them (Model::validate).
Tensor KvPool::k(int il) const {
  return view(k_[static_cast<size_t>(il)], capacity_);
}
Tensor KvPool::v(int il) const {
  return view(v_[static_cast<size_t>(il)], capacity_);
}

Status KvPool::reserve(int n_blocks) {
  if (n_blocks <= capacity_) {
    n_blocks_ = std::max(n_blocks_, n_blocks);
    return {};
  }
  const int grow = std::max(cfg_.min_grow_blocks, capacity_ / 4);
  const int new_cap = std::max(n_blocks, capacity_ + grow);
  std::vector<Buffer*> nk(k_.size(), nullptr), nv(v_.size(), nullptr);
  auto release = [&] {
    for (Buffer* b : nk)
      if (b) backend_.free(b);
    for (Buffer* b : nv)
      if (b) backend_.free(b);
  };
  for (size_t il = 0; il < k_.size(); ++il) {
    auto kb = backend_.alloc(layer_bytes(new_cap));
    if (!kb.ok())
      return release(), error("KV pool: growing to {} blocks: {}", new_cap, kb.message());
    nk[il] = *kb;
    auto vb = backend_.alloc(layer_bytes(new_cap));
    if (!vb.ok())
      return release(), error("KV pool: growing to {} blocks: {}", new_cap, vb.message());
    nv[il] = *vb;
  }
  // Copy the blocks in use (ids >= n_blocks_ were never handed out, nothing to keep).
  for (size_t il = 0; il < k_.size() && n_blocks_ > 0; ++il) {
    backend_.copy(view(k_[il], n_blocks_), view(nk[il], n_blocks_));
    backend_.copy(view(v_[il], n_blocks_), view(nv[il], n_blocks_));
  }
  backend_.sync();
  for (size_t il = 0; il < k_.size(); ++il) {
    if (k_[il]) backend_.free(k_[il]);
    if (v_[il]) backend_.free(v_[il]);
    k_[il] = nk[il];
    v_[il] = nv[il];
  }
  capacity_ = new_cap;
  n_blocks_ = n_blocks;
  return {};
}

}  // namespace t9::model
