#include "model/recurrent_state.h"

#include <algorithm>
#include <utility>

namespace t9::model {

RecurrentState::RecurrentState(Backend& backend, const RecurrentStateConfig& cfg)
    : backend_(backend), cfg_(cfg) {}

RecurrentState::~RecurrentState() {
  for (Buffer* b : conv_) backend_.free(b);
  for (Buffer* b : delta_) backend_.free(b);
}

size_t RecurrentState::conv_floats() const {
  return static_cast<size_t>(cfg_.conv_rows) * cfg_.conv_dim;
}
size_t RecurrentState::delta_floats() const {
  return static_cast<size_t>(cfg_.n_v_heads) * cfg_.d_k * cfg_.d_v;
}
size_t RecurrentState::slot_floats() const {
  return (conv_floats() + delta_floats()) * cfg_.n_layers;
}

Tensor RecurrentState::conv(int l) const {
  return make_tensor(conv_[static_cast<size_t>(l)], 0, GgmlType::F32, cfg_.conv_dim, cfg_.conv_rows,
                     capacity_);
}

Tensor RecurrentState::delta(int l) const {
  return make_tensor(delta_[static_cast<size_t>(l)], 0, GgmlType::F32, cfg_.d_v, cfg_.d_k,
                     cfg_.n_v_heads, capacity_);
}

Status RecurrentState::grow(int min_capacity) {
  const int cap =
      std::max({min_capacity, capacity_ + capacity_ / 4, capacity_ + cfg_.min_grow_slots});
  std::vector<Buffer*> nconv, ndelta;
  auto undo = [&] {
    for (Buffer* b : nconv) backend_.free(b);
    for (Buffer* b : ndelta) backend_.free(b);
  };
  for (int l = 0; l < cfg_.n_layers; ++l) {
    auto c = backend_.alloc(conv_floats() * cap * 4);
    if (!c.ok()) {
      undo();
      return error("recurrent state for {} slots: {}", cap, c.message());
    }
    nconv.push_back(*c);
    auto d = backend_.alloc(delta_floats() * cap * 4);
    if (!d.ok()) {
      undo();
      return error("recurrent state for {} slots: {}", cap, d.message());
    }
    ndelta.push_back(*d);
  }
  // Keep the existing slots' contents (a backend copy: no host round trip).
  for (int l = 0; l < cfg_.n_layers && capacity_ > 0; ++l) {
    const auto L = static_cast<size_t>(l);
    backend_.copy(
        conv(l), make_tensor(nconv[L], 0, GgmlType::F32, cfg_.conv_dim, cfg_.conv_rows, capacity_));
    backend_.copy(delta(l), make_tensor(ndelta[L], 0, GgmlType::F32, cfg_.d_v, cfg_.d_k,
                                        cfg_.n_v_heads, capacity_));
    backend_.free(conv_[L]);
    backend_.free(delta_[L]);
  }
  conv_ = std::move(nconv);
  delta_ = std::move(ndelta);
  capacity_ = cap;
  used_.resize(static_cast<size_t>(cap), false);
  fresh_.resize(static_cast<size_t>(cap), false);
  return {};
}

Result<int> RecurrentState::acquire() {
  auto it = std::find(used_.begin(), used_.end(), false);
  if (it == used_.end()) {
    T9_TRY(grow(capacity_ + 1));
    it = std::find(used_.begin(), used_.end(), false);
  }
  const int slot = static_cast<int>(it - used_.begin());
  used_[static_cast<size_t>(slot)] = true;
  fresh_[static_cast<size_t>(slot)] = true;
  return slot;
}

void RecurrentState::release(int slot) {
  T9_CHECK(in_use(slot), "releasing recurrent slot {} that is not in use", slot);
  used_[static_cast<size_t>(slot)] = false;
}

bool RecurrentState::in_use(int slot) const {
  return slot >= 0 && slot < capacity_ && used_[static_cast<size_t>(slot)];
}

StateSnapshot::~StateSnapshot() {
  if (buf_ != nullptr) backend_->free(buf_);
}

StateSnapshot::StateSnapshot(StateSnapshot&& o) noexcept
    : backend_(o.backend_), buf_(std::exchange(o.buf_, nullptr)), zero_(o.zero_) {}

StateSnapshot& StateSnapshot::operator=(StateSnapshot&& o) noexcept {
  if (this != &o) {
    if (buf_ != nullptr) backend_->free(buf_);
    backend_ = o.backend_;
    buf_ = std::exchange(o.buf_, nullptr);
    zero_ = o.zero_;
  }
  return *this;
}

void RecurrentState::copy_slot(int slot, Buffer* snap, bool to_snap) {
  for (int l = 0; l < cfg_.n_layers; ++l) copy_layer(slot, l, snap, to_snap);
}

void RecurrentState::copy_layer(int slot, int l, Buffer* snap, bool to_snap) {
  // Bytes into the snapshot: per layer the conv rows, then the delta matrix.
  size_t at = static_cast<size_t>(l) * (conv_floats() + delta_floats()) * 4;
  for (const auto& [buf, n] : {std::pair{conv_[static_cast<size_t>(l)], conv_floats()},
                               std::pair{delta_[static_cast<size_t>(l)], delta_floats()}}) {
    const Tensor live =
        make_tensor(buf, n * 4 * static_cast<size_t>(slot), GgmlType::F32, static_cast<int64_t>(n));
    const Tensor kept = make_tensor(snap, at, GgmlType::F32, static_cast<int64_t>(n));
    backend_.copy(to_snap ? live : kept, to_snap ? kept : live);
    at += n * 4;
  }
}

Status RecurrentState::snapshot(int slot, StateSnapshot& snap) {
  T9_CHECK(in_use(slot), "snapshot of recurrent slot {} that is not in use", slot);
  if (fresh(slot)) {
    snap.zero_ = true;
    return {};
  }
  T9_TRY(prepare_snapshot(snap));
  copy_slot(slot, snap.buf_, true);
  return {};
}

Status RecurrentState::prepare_snapshot(StateSnapshot& snap) {
  if (snap.buf_ == nullptr) {
    T9_ASSIGN_OR_RETURN(snap.buf_, backend_.alloc(slot_floats() * sizeof(float)));
    snap.backend_ = &backend_;
  }
  snap.zero_ = false;
  return {};
}

void RecurrentState::snapshot_layer(int slot, int layer, StateSnapshot& snap) {
  T9_CHECK(in_use(slot) && snap.buf_ != nullptr && layer >= 0 && layer < cfg_.n_layers,
           "layer snapshot of recurrent slot {} layer {}", slot, layer);
  copy_layer(slot, layer, snap.buf_, true);
}

Status RecurrentState::restore(int slot, const StateSnapshot& snap) {
  T9_CHECK(in_use(slot), "restore into recurrent slot {} that is not in use", slot);
  if (snap.zero_) {
    set_fresh(slot, true);
    return {};
  }
  if (snap.backend_ != &backend_) return error("recurrent state snapshot of another backend");
  copy_slot(slot, snap.buf_, false);
  set_fresh(slot, false);
  return {};
}

}  // namespace t9::model
