// KvPool: the paged K/V storage of every attention layer, in backend memory. Block b of a layer
// holds the K (or V) rows of positions [b * block_size, (b + 1) * block_size) of whichever
// sequence owns b (the engine's BlockPool decides that; this class only backs the ids).
//
// Storage is taken on demand: a pool starts empty, and reserve() grows it in chunks, so
// declaring a 128K context costs nothing until tokens arrive. Growing reallocates each layer's
// buffer and copies the old blocks (the attention op wants one tensor per layer).
#pragma once

#include <vector>

#include "backend/backend.h"
#include "core/result.h"

namespace t9::model {

struct KvPoolConfig {
  int n_layer = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  int block_size = 16;            // tokens per block
  GgmlType type = GgmlType::F16;  // F16 (default, as llama.cpp) or F32 (debugging)
  int min_grow_blocks = 64;       // growth chunk; also at least 1/4 of the current size
};

class KvPool {
 public:
  KvPool(Backend& backend, const KvPoolConfig& cfg);
  ~KvPool();
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  // Mutates: backs block ids [0, n_blocks) with storage, keeping the existing blocks' contents.
  // Never shrinks. An Error means out of memory; the pool is then unchanged.
  Status reserve(int n_blocks);

  int n_blocks() const { return n_blocks_; }  // ids usable now
  int capacity() const { return capacity_; }  // ids backed by allocated memory
  const KvPoolConfig& config() const { return cfg_; }
  size_t bytes_allocated() const;
  // [capacity * block_size, n_kv_head, head_dim] views of layer il.
  Tensor k(int il) const;
  Tensor v(int il) const;

 private:
  Tensor view(Buffer* buf, int n_blocks) const;
  size_t layer_bytes(int n_blocks) const;

  Backend& backend_;
  KvPoolConfig cfg_;
  int n_blocks_ = 0;
  int capacity_ = 0;
  std::vector<Buffer*> k_;  // [n_layer], null while empty
  std::vector<Buffer*> v_;
};

}  // namespace t9::model
