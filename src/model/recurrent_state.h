// RecurrentState: the per-sequence state of a hybrid model's Gated DeltaNet layers, beside the
// paged KV pool of its attention layers. Slot s of layer l holds one sequence's
//   conv state  F32 [K - 1, Cd]          (the last K - 1 conv inputs, oldest first)
//   delta state F32 [n_v_heads, d_k, d_v] (the matrix S of the gated delta rule)
// in two backend tensors per layer indexed by slot, so the ops find a sequence's state from its
// RecurrentSeq::slot. Slots are taken on demand (storage grows in chunks, keeping the contents)
// and freed with the sequence. A freshly taken slot is zeroed by the ops on its first use.
//
// snapshot()/restore() copy one slot of every layer to/from a StateSnapshot in backend memory
// (device memory on CUDA: ~66 MB for Qwen3.5-35B-A3B is a device copy of tens of microseconds,
// not a PCIe round trip), for prefix-cache checkpoints and speculative rollback. Not thread-safe
// (the engine thread owns it).
#pragma once

#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/result.h"

namespace t9::model {

struct RecurrentStateConfig {
  int n_layers = 0;   // recurrent (Gated DeltaNet) layers
  int conv_rows = 0;  // K - 1
  int conv_dim = 0;   // Cd = 2 n_k_heads d_k + n_v_heads d_v
  int n_v_heads = 0;
  int d_k = 0;
  int d_v = 0;
  int min_grow_slots = 8;
};

// One slot's state over every layer (RecurrentState::snapshot), in a backend buffer it owns.
// A fresh slot's snapshot holds no buffer: it reads as zeros. Move-only.
class StateSnapshot {
 public:
  StateSnapshot() = default;
  ~StateSnapshot();
  StateSnapshot(StateSnapshot&& o) noexcept;
  StateSnapshot& operator=(StateSnapshot&& o) noexcept;
  StateSnapshot(const StateSnapshot&) = delete;
  StateSnapshot& operator=(const StateSnapshot&) = delete;

 private:
  friend class RecurrentState;
  Backend* backend_ = nullptr;
  Buffer* buf_ = nullptr;  // slot_floats() floats, allocated on the first non-zero snapshot
  bool zero_ = true;
};

class RecurrentState {
 public:
  RecurrentState(Backend& backend, const RecurrentStateConfig& cfg);
  ~RecurrentState();
  RecurrentState(const RecurrentState&) = delete;
  RecurrentState& operator=(const RecurrentState&) = delete;

  // A free slot, marked fresh (its state reads as zero on first use). Error: out of memory.
  Result<int> acquire();
  void release(int slot);
  bool in_use(int slot) const;
  // Fresh slots start from zero in the next forward; forward() clears the mark.
  bool fresh(int slot) const { return fresh_[static_cast<size_t>(slot)]; }
  void set_fresh(int slot, bool f) { fresh_[static_cast<size_t>(slot)] = f; }

  int capacity() const { return capacity_; }
  const RecurrentStateConfig& config() const { return cfg_; }
  // Recurrent layer l (0-based among recurrent layers): [capacity, K - 1, Cd] and
  // [capacity, n_v_heads, d_k, d_v].
  Tensor conv(int l) const;
  Tensor delta(int l) const;

  // Floats of one slot over all layers (conv then delta state per layer).
  size_t slot_floats() const;
  // Copies slot's state into `snap` (its buffer is taken on first use, then reused); a fresh
  // slot's snapshot reads as zeros. Error: no memory for the buffer.
  Status snapshot(int slot, StateSnapshot& snap);
  // Replaces slot's state with a snapshot (a zero snapshot marks the slot fresh: the next forward
  // starts it from zero).
  Status restore(int slot, const StateSnapshot& snap);
  // A snapshot taken layer by layer during a forward (a checkpoint inside a step): prepare
  // takes its buffer and marks it non-zero, then snapshot_layer copies each layer's state of the
  // slot when the layer has passed the checkpoint (Model::forward calls both). Error: no memory.
  Status prepare_snapshot(StateSnapshot& snap);
  void snapshot_layer(int slot, int layer, StateSnapshot& snap);

 private:
  Status grow(int min_capacity);
  size_t conv_floats() const;
  size_t delta_floats() const;
  // Copies the slot's layers (or layer l) to the snapshot (to_snap) or back.
  void copy_slot(int slot, Buffer* snap, bool to_snap);
  void copy_layer(int slot, int l, Buffer* snap, bool to_snap);

  Backend& backend_;
  RecurrentStateConfig cfg_;
  int capacity_ = 0;
  std::vector<Buffer*> conv_, delta_;  // [n_layers]
  std::vector<bool> used_, fresh_;     // [capacity]
};

}  // namespace t9::model
