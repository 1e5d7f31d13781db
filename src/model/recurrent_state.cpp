#include "model/recurrent_state.h"

#include <algorithm>

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
  return make_tensor(conv_[static_cast<size_t>(l)], 0, GgmlType::F32, cfg_.conv_dim,
                     cfg_.conv_rows, capacity_);
}

Tensor RecurrentState::delta(int l) const {
  return make_tensor(delta_[static_cast<size_t>(l)], 0, GgmlType::F32, cfg_.d_v, cfg_.d_k,
                     cfg_.n_v_heads, capacity_);
}

Status RecurrentState::grow(int min_capacity) {
  const int cap = std::max({min_capacity, capacity_ + capacity_ / 4, capacity_ + cfg_.min_grow_slots});
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
    backend_.copy(conv(l), make_tensor(nconv[L], 0, GgmlType::F32, cfg_.conv_dim, cfg_.conv_rows,
                                       capacity_));
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

void RecurrentState::snapshot(int slot, std::vector<float>& host) {
  T9_CHECK(in_use(slot), "snapshot of recurrent slot {} that is not in use", slot);
  host.assign(slot_floats(), 0.0f);
  if (fresh(slot)) return;
  float* p = host.data();
  for (int l = 0; l < cfg_.n_layers; ++l) {
    backend_.download(conv_[static_cast<size_t>(l)], conv_floats() * 4 * slot, p,
                      conv_floats() * 4);
    p += conv_floats();
    backend_.download(delta_[static_cast<size_t>(l)], delta_floats() * 4 * slot, p,
                      delta_floats() * 4);
    p += delta_floats();
  }
  backend_.sync();
}

Status RecurrentState::restore(int slot, std::span<const float> host) {
  T9_CHECK(in_use(slot), "restore into recurrent slot {} that is not in use", slot);
  if (host.size() != slot_floats())
    return error("recurrent state snapshot has {} floats, expected {}", host.size(),
                 slot_floats());
  const float* p = host.data();
  for (int l = 0; l < cfg_.n_layers; ++l) {
    backend_.upload(conv_[static_cast<size_t>(l)], conv_floats() * 4 * slot, p, conv_floats() * 4);
    p += conv_floats();
    backend_.upload(delta_[static_cast<size_t>(l)], delta_floats() * 4 * slot, p,
                    delta_floats() * 4);
    p += delta_floats();
  }
  set_fresh(slot, false);
  return {};
}

}  // namespace t9::model
