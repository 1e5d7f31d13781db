#include "model/synth/synth.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/thread_pool.h"
#include "quant/quantize.h"

namespace t9::synth {
namespace {

constexpr uint64_t kAlignment = 32;        // GGUF default (general.alignment absent)
constexpr uint64_t kSlabBytes = 32 << 20;  // output bytes generated per parallel step

uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t align_up(uint64_t x) {
  return (x + kAlignment - 1) / kAlignment * kAlignment;
}

template <typename T>
void put(std::vector<uint8_t>& b, T x) {
  const size_t at = b.size();
  b.resize(at + sizeof(T));
  std::memcpy(b.data() + at, &x, sizeof(T));
}

// The metadata section (everything after the 24-byte header up to the tensor infos), serialized by
// GgufWriter so values are checked as for every file we write. GgufWriter keeps tensor bytes in
// memory, so the tensors are streamed here: serialize the metadata alone with general.alignment 1
// (no padding, so the bytes end exactly after the last key) as the last key, then set that key's
// u32 value, the last 4 bytes, to the real alignment.
Result<std::vector<uint8_t>> metadata_bytes(const SynthOptions& opt, uint64_t& n_kv) {
  gguf::GgufWriter w;
  T9_TRY(add_model_metadata(w, opt.shape, opt.quant, opt.tokenizer_json));
  w.set("general.alignment", gguf::Value::u32(1));
  T9_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, w.to_bytes());
  const uint32_t align = kAlignment;
  std::memcpy(bytes.data() + bytes.size() - 4, &align, 4);
  n_kv = w.n_metadata();
  bytes.erase(bytes.begin(), bytes.begin() + 24);  // magic, version, n_tensors, n_kv
  return bytes;
}

// Header, metadata, tensor infos and the padding before the data section.
Result<std::vector<uint8_t>> file_head(const SynthOptions& opt, const std::vector<TensorPlan>& plan,
                                       std::vector<uint64_t>& offsets) {
  uint64_t n_kv = 0;
  T9_ASSIGN_OR_RETURN(std::vector<uint8_t> meta, metadata_bytes(opt, n_kv));
  std::vector<uint8_t> b;
  put<uint32_t>(b, gguf::kMagic);
  put<uint32_t>(b, 3);
  put<uint64_t>(b, plan.size());
  put<uint64_t>(b, n_kv);
  b.insert(b.end(), meta.begin(), meta.end());
  uint64_t next = 0;
  offsets.clear();
  for (const TensorPlan& t : plan) {
    put<uint64_t>(b, t.name.size());
    b.insert(b.end(), t.name.begin(), t.name.end());
    put<uint32_t>(b, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) put<uint64_t>(b, static_cast<uint64_t>(d));
    put<uint32_t>(b, static_cast<uint32_t>(t.type));
    put<uint64_t>(b, next);
    offsets.push_back(next);
    next = align_up(next + t.n_bytes());
  }
  b.resize(align_up(b.size()), 0);
  return b;
}

// Triangular on (-1, 1) (sum of two uniforms): variance 1/6, no transcendental functions, so the
// value is the same on every machine.
float symmetric(uint64_t h) {
  const double u1 = static_cast<double>(h >> 40) * 0x1p-24;
  const double u2 = static_cast<double>((h >> 16) & 0xFFFFFF) * 0x1p-24;
  return static_cast<float>(u1 + u2 - 1.0);
}

float unit(uint64_t h) {
  return static_cast<float>(static_cast<double>(h >> 40) * 0x1p-24);
}

// Generates rows [r0, r1) of `t` into dst (row_bytes each), in parallel over rows.
void make_rows(ThreadPool& pool, const TensorPlan& t, uint64_t key, int64_t r0, int64_t r1,
               uint8_t* dst) {
  const int64_t ne0 = t.ne[0];
  const size_t rb = row_bytes(t.type, ne0);
  const int64_t grain = std::max<int64_t>(1, 65536 / ne0);
  pool.parallel_for(r1 - r0, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(ne0));
    for (int64_t r = begin; r < end; ++r) {
      const uint64_t first = static_cast<uint64_t>(r0 + r) * static_cast<uint64_t>(ne0);
      for (int64_t j = 0; j < ne0; ++j)
        row[static_cast<size_t>(j)] = synth_value(t, key, first + static_cast<uint64_t>(j));
      quantize_row(t.type, row.data(), dst + static_cast<size_t>(r) * rb, ne0);
    }
  });
}

Status write_tensor(ThreadPool& pool, FILE* f, const TensorPlan& t, uint64_t seed,
                    std::vector<uint8_t>& slab) {
  const int64_t rows = t.n_elements() / t.ne[0];
  const size_t rb = row_bytes(t.type, t.ne[0]);
  const int64_t rows_per_slab = std::max<int64_t>(1, static_cast<int64_t>(kSlabBytes / rb));
  const uint64_t key = tensor_key(seed, t.name);
  for (int64_t r0 = 0; r0 < rows; r0 += rows_per_slab) {
    const int64_t r1 = std::min(rows, r0 + rows_per_slab);
    const size_t n = static_cast<size_t>(r1 - r0) * rb;
    slab.resize(std::max(slab.size(), n));
    make_rows(pool, t, key, r0, r1, slab.data());
    if (std::fwrite(slab.data(), 1, n, f) != n)
      return error("writing tensor '{}': {}", t.name, std::strerror(errno));
  }
  const uint64_t pad = align_up(t.n_bytes()) - t.n_bytes();
  static const uint8_t zeros[kAlignment] = {};
  if (std::fwrite(zeros, 1, pad, f) != pad)
    return error("writing tensor '{}': {}", t.name, std::strerror(errno));
  return {};
}

}  // namespace

uint64_t tensor_key(uint64_t seed, const std::string& name) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 0x100000001B3ull;
  return splitmix64(seed ^ splitmix64(h));
}

float synth_value(const TensorPlan& t, uint64_t key, uint64_t index) {
  const uint64_t h = splitmix64(key + index);
  constexpr float kSqrt6 = 2.449489743f;  // symmetric() has std 1/sqrt(6)
  switch (t.init) {
    case Init::kMatrix:
    case Init::kBias:
      return symmetric(h) * kSqrt6 * t.scale;
    case Init::kNorm:
      return 1.0f + symmetric(h) * kSqrt6 * t.scale;
    case Init::kSsmA:
      return -(1.0f + 7.0f * unit(h));
    case Init::kDtBias: {
      const double dt = std::exp(std::log(1e-3) + unit(h) * (std::log(1e-1) - std::log(1e-3)));
      return static_cast<float>(dt + std::log(-std::expm1(-dt)));
    }
  }
  return 0.0f;
}

Result<SynthSummary> summarize(const SynthOptions& opt) {
  SynthSummary s;
  T9_ASSIGN_OR_RETURN(s.tensors, make_plan(opt.shape, opt.quant));
  std::vector<uint64_t> offsets;
  T9_ASSIGN_OR_RETURN(std::vector<uint8_t> head, file_head(opt, s.tensors, offsets));
  s.file_bytes = head.size();
  for (const TensorPlan& t : s.tensors) {
    s.n_params += static_cast<uint64_t>(t.n_elements());
    s.file_bytes += align_up(t.n_bytes());
  }
  return s;
}

Status write_synth_gguf(const SynthOptions& opt, const std::string& path,
                        const SynthProgress& progress) {
  T9_ASSIGN_OR_RETURN(std::vector<TensorPlan> plan, make_plan(opt.shape, opt.quant));
  std::vector<uint64_t> offsets;
  T9_ASSIGN_OR_RETURN(std::vector<uint8_t> head, file_head(opt, plan, offsets));
  const std::string partial = path + ".partial";
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(partial.c_str(), "wb"), &std::fclose);
  if (!f) return error("{}: cannot create: {}", partial, std::strerror(errno));
  if (std::fwrite(head.data(), 1, head.size(), f.get()) != head.size())
    return error("{}: write failed: {}", partial, std::strerror(errno));
  ThreadPool pool(opt.n_threads);
  std::vector<uint8_t> slab;
  for (size_t i = 0; i < plan.size(); ++i) {
    T9_TRY(write_tensor(pool, f.get(), plan[i], opt.seed, slab));
    if (progress) progress(i + 1, plan.size());
  }
  if (std::fclose(f.release()) != 0)
    return error("{}: close failed: {}", partial, std::strerror(errno));
  if (std::rename(partial.c_str(), path.c_str()) != 0)
    return error("{}: cannot rename to {}: {}", partial, path, std::strerror(errno));
  return {};
}

}  // namespace t9::synth
