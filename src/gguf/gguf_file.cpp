#include "gguf/gguf_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

namespace t9::gguf {

static_assert(std::endian::native == std::endian::little,
              "GGUF is little-endian and the parser reads fields with memcpy");

std::string_view value_type_name(ValueType t) {
  static constexpr std::string_view kNames[kNumValueTypes] = {
      "UINT8", "INT8",   "UINT16", "INT16",  "UINT32", "INT32",  "FLOAT32",
      "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64",  "FLOAT64"};
  const auto i = static_cast<uint32_t>(t);
  return i < kNumValueTypes ? kNames[i] : std::string_view("?");
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::UINT16:
    case ValueType::INT16:
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::UINT64:
    case ValueType::INT64:
      return true;
    default:
      return false;
  }
}

namespace {

// The fewest bytes a value of type `t` occupies: lets us reject a claimed count before
// allocating anything for it.
uint64_t min_value_bytes(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::BOOL:
      return 1;
    case ValueType::UINT16:
    case ValueType::INT16:
      return 2;
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::FLOAT32:
      return 4;
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT64:
      return 8;
    case ValueType::STRING:
      return 8;  // the u64 length
    case ValueType::ARRAY:
      return 12;  // u32 elem type + u64 count
  }
  return 1;
}

constexpr uint64_t kMinKvBytes = 8 + 4 + 1;              // empty key, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // empty name, n_dims=0, type, offset

// A count that fits the bytes left can still be huge in a big file (a Value is ~48 bytes, a
// UINT8 item 1 byte): reserve at most this many items up front, then grow only as items are
// actually parsed, so memory follows real content, not claims. Covers the 262k-token vocabs.
constexpr uint64_t kMaxUpfrontItems = uint64_t{1} << 19;

}  // namespace

// One pass over the header. Every read checks the bytes left first; every count is checked
// against the bytes left before anything is reserved for it.
class Parser {
 public:
  Parser(std::span<const uint8_t> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  Status run(GgufFile& f) {
    T9_TRY(read_header(f));
    T9_TRY(read_metadata(f));
    T9_TRY(read_tensor_infos(f));
    return check_tensor_data(f);
  }

 private:
  uint64_t left() const { return bytes_.size() - pos_; }

  // The single error of this file: file name, byte offset, context, then the problem.
  template <typename... Args>
  Error fail(uint64_t at, fmt::format_string<Args...> f, Args&&... args) const {
    std::string where = ctx_;
    for (uint64_t i : path_) where += fmt::format("[{}]", i);
    if (!where.empty()) where += ": ";
    return Error{fmt::format("{}: offset {}: {}{}", name_, at, where,
                             fmt::format(f, std::forward<Args>(args)...))};
  }

  template <typename T>
  Status read(T& out, std::string_view what) {
    if (left() < sizeof(T))
      return fail(pos_, "{} needs {} bytes but only {} are left (file truncated?)", what, sizeof(T),
                  left());
    std::memcpy(&out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return {};
  }

  Status read_string(std::string& out, std::string_view what) {
    const uint64_t at = pos_;
    uint64_t len = 0;
    T9_TRY(read(len, what));
    if (len > left())
      return fail(at, "{} length {} exceeds the {} bytes left in the file", what, len, left());
    out.assign(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return {};
  }

  Status read_value_type(ValueType& out, std::string_view what) {
    const uint64_t at = pos_;
    uint32_t id = 0;
    T9_TRY(read(id, what));
    if (id >= kNumValueTypes)
      return fail(at, "unknown {} {} (valid: 0..{})", what, id, kNumValueTypes - 1);
    out = static_cast<ValueType>(id);
    return {};
  }

  template <typename Raw, typename Stored>
  Status read_scalar(Value& out) {
    Raw x{};
    T9_TRY(read(x, "value"));
    out.v = static_cast<Stored>(x);
    return {};
  }

  Status read_value(ValueType t, Value& out, uint32_t depth) {
    out.type = t;
    switch (t) {
      case ValueType::UINT8:
        return read_scalar<uint8_t, uint64_t>(out);
      case ValueType::INT8:
        return read_scalar<int8_t, int64_t>(out);
      case ValueType::UINT16:
        return read_scalar<uint16_t, uint64_t>(out);
      case ValueType::INT16:
        return read_scalar<int16_t, int64_t>(out);
      case ValueType::UINT32:
        return read_scalar<uint32_t, uint64_t>(out);
      case ValueType::INT32:
        return read_scalar<int32_t, int64_t>(out);
      case ValueType::UINT64:
        return read_scalar<uint64_t, uint64_t>(out);
      case ValueType::INT64:
        return read_scalar<int64_t, int64_t>(out);
      case ValueType::FLOAT32:
        return read_scalar<float, double>(out);
      case ValueType::FLOAT64:
        return read_scalar<double, double>(out);
      case ValueType::BOOL: {
        const uint64_t at = pos_;
        uint8_t b = 0;
        T9_TRY(read(b, "bool value"));
        if (b > 1) return fail(at, "bool value is {}, not 0 or 1", b);
        out.v = b == 1;
        return {};
      }
      case ValueType::STRING:
        return read_string(out.v.emplace<std::string>(), "string");
      case ValueType::ARRAY:
        return read_array(out.v.emplace<Array>(), depth);
    }
    return fail(pos_, "unknown value type {}", static_cast<uint32_t>(t));
  }

  Status read_array(Array& arr, uint32_t depth) {
    if (depth >= kMaxArrayNesting)
      return fail(pos_, "arrays nested deeper than {} levels", kMaxArrayNesting);
    T9_TRY(read_value_type(arr.elem_type, "array element type"));
    const uint64_t count_at = pos_;
    uint64_t count = 0;
    T9_TRY(read(count, "array length"));
    const uint64_t min_bytes = min_value_bytes(arr.elem_type);
    if (count > left() / min_bytes)
      return fail(count_at,
                  "array length {} of {} cannot fit in the {} bytes left (each item takes at "
                  "least {} bytes)",
                  count, value_type_name(arr.elem_type), left(), min_bytes);
    arr.items.reserve(std::min(count, kMaxUpfrontItems));
    path_.push_back(0);
    for (uint64_t i = 0; i < count; ++i) {
      path_.back() = i;
      T9_TRY(read_value(arr.elem_type, arr.items.emplace_back(), depth + 1));
    }
    path_.pop_back();
    return {};
  }

  Status read_header(GgufFile& f) {
    if (bytes_.size() < 4)
      return fail(0, "file is {} bytes, too short for the 'GGUF' magic", bytes_.size());
    uint32_t magic = 0;
    T9_TRY(read(magic, "magic"));
    if (magic != kMagic)
      return fail(0, "bad magic {:02x} {:02x} {:02x} {:02x}, expected 'GGUF' (47 47 55 46)",
                  bytes_[0], bytes_[1], bytes_[2], bytes_[3]);
    T9_TRY(read(f.version_, "version"));
    if (f.version_ != 2 && f.version_ != 3) {
      const uint32_t swapped = __builtin_bswap32(f.version_);
      if (swapped == 2 || swapped == 3)
        return fail(4, "GGUF version field is {:#x}: a big-endian file, which is not supported",
                    f.version_);
      return fail(4, "unsupported GGUF version {} (only versions 2 and 3 are supported)",
                  f.version_);
    }
    uint64_t n_tensors = 0, n_kv = 0;
    T9_TRY(read(n_tensors, "tensor count"));
    T9_TRY(read(n_kv, "metadata count"));
    if (n_kv > left() / kMinKvBytes)
      return fail(16,
                  "metadata count {} is impossible: each key/value needs at least {} bytes "
                  "and only {} bytes are left (file truncated?)",
                  n_kv, kMinKvBytes, left());
    if (n_tensors > left() / kMinTensorInfoBytes ||
        n_kv * kMinKvBytes + n_tensors * kMinTensorInfoBytes > left())
      return fail(8,
                  "tensor count {} is impossible: each tensor info needs at least {} bytes "
                  "and only {} bytes are left after the metadata's minimum (file truncated?)",
                  n_tensors, kMinTensorInfoBytes, left() - std::min(left(), n_kv * kMinKvBytes));
    f.kv_.reserve(std::min(n_kv, kMaxUpfrontItems));
    f.tensors_.reserve(std::min(n_tensors, kMaxUpfrontItems));
    n_kv_ = n_kv;
    n_tensors_ = n_tensors;
    return {};
  }

  Status read_metadata(GgufFile& f) {
    for (uint64_t i = 0; i < n_kv_; ++i) {
      const uint64_t at = pos_;
      ctx_ = fmt::format("metadata #{}", i);
      std::string key;
      T9_TRY(read_string(key, "key"));
      if (key.empty()) return fail(at, "empty key");
      ctx_ = fmt::format("metadata '{}'", key);
      if (auto it = f.kv_index_.find(key); it != f.kv_index_.end())
        return fail(at, "duplicate key (first defined as metadata #{})", it->second);
      ValueType type{};
      T9_TRY(read_value_type(type, "value type"));
      Value value;
      const uint64_t value_at = pos_;
      T9_TRY(read_value(type, value, 0));
      if (key == "general.alignment") T9_TRY(set_alignment(f, value, value_at));
      f.kv_index_.emplace(key, f.kv_.size());
      f.kv_.emplace_back(std::move(key), std::move(value));
    }
    ctx_.clear();
    return {};
  }

  Status set_alignment(GgufFile& f, const Value& v, uint64_t at) {
    if (v.type != ValueType::UINT32)
      return fail(at, "must be UINT32, found {}", value_type_name(v.type));
    const uint64_t a = std::get<uint64_t>(v.v);
    if (a == 0 || !std::has_single_bit(a)) return fail(at, "alignment {} is not a power of two", a);
    f.alignment_ = a;
    return {};
  }

  Status read_dims(TensorInfo& t) {
    const uint64_t at = pos_;
    uint32_t n_dims = 0;
    T9_TRY(read(n_dims, "n_dims"));
    if (n_dims > kMaxDims) return fail(at, "n_dims is {}, more than ggml's {}", n_dims, kMaxDims);
    t.ne.resize(n_dims);
    int64_t n = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne_at = pos_;
      uint64_t ne = 0;
      T9_TRY(read(ne, "dimension"));
      if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return fail(ne_at, "ne[{}] = {} is negative as int64", d, ne);
      t.ne[d] = static_cast<int64_t>(ne);
      if (__builtin_mul_overflow(n, t.ne[d], &n))
        return fail(ne_at, "element count overflows int64 at ne[{}] = {}", d, ne);
    }
    t.n_elements = n;
    return {};
  }

  Status read_tensor_type(TensorInfo& t) {
    const uint64_t at = pos_;
    uint32_t id = 0;
    T9_TRY(read(id, "tensor type"));
    const auto tr = ggml_type_traits(id);
    if (!tr) return fail(at, "unknown ggml type id {}", id);
    t.type = tr->type;
    const int64_t ne0 = t.ne.empty() ? 1 : t.ne[0];
    if (ne0 % tr->block_elems != 0)
      return fail(at, "ne[0] = {} is not a multiple of {}'s block size {}", ne0, tr->name,
                  tr->block_elems);
    const uint64_t n_blocks = static_cast<uint64_t>(t.n_elements) / tr->block_elems;
    if (__builtin_mul_overflow(n_blocks, uint64_t{tr->block_bytes}, &t.n_bytes))
      return fail(at, "byte size of {} {} elements overflows 64 bits", t.n_elements, tr->name);
    return {};
  }

  Status read_tensor_infos(GgufFile& f) {
    offset_field_at_.reserve(std::min(n_tensors_, kMaxUpfrontItems));
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      const uint64_t at = pos_;
      ctx_ = fmt::format("tensor info #{}", i);
      TensorInfo t;
      T9_TRY(read_string(t.name, "name"));
      ctx_ = fmt::format("tensor '{}'", t.name);
      if (auto it = f.tensor_index_.find(t.name); it != f.tensor_index_.end())
        return fail(at, "duplicate tensor name (first defined as tensor info #{})", it->second);
      T9_TRY(read_dims(t));
      T9_TRY(read_tensor_type(t));
      offset_field_at_.push_back(pos_);
      T9_TRY(read(t.offset, "data offset"));
      f.tensor_index_.emplace(t.name, f.tensors_.size());
      f.tensors_.push_back(std::move(t));
    }
    ctx_.clear();
    // pos_ <= size, and the alignment is a power of two <= 2^31: no overflow.
    f.data_offset_ = (pos_ + f.alignment_ - 1) / f.alignment_ * f.alignment_;
    return {};
  }

  // Offsets aligned, data inside the file, no two tensors sharing bytes.
  Status check_tensor_data(GgufFile& f) {
    const uint64_t size = bytes_.size();
    const uint64_t avail = size > f.data_offset_ ? size - f.data_offset_ : 0;
    for (size_t i = 0; i < f.tensors_.size(); ++i) {
      const TensorInfo& t = f.tensors_[i];
      ctx_ = fmt::format("tensor '{}'", t.name);
      if (t.offset % f.alignment_ != 0)
        return fail(offset_field_at_[i], "data offset {} is not a multiple of the alignment {}",
                    t.offset, f.alignment_);
      if (t.offset > avail || t.n_bytes > avail - t.offset)
        return fail(offset_field_at_[i],
                    "data [{}, +{}) runs past the end of the file: the data section starts at "
                    "{} and holds {} bytes (file truncated?)",
                    t.offset, t.n_bytes, f.data_offset_, avail);
    }
    std::vector<uint32_t> order;
    order.reserve(f.tensors_.size());
    for (size_t i = 0; i < f.tensors_.size(); ++i)
      if (f.tensors_[i].n_bytes > 0) order.push_back(static_cast<uint32_t>(i));
    std::sort(order.begin(), order.end(),
              [&](uint32_t a, uint32_t b) { return f.tensors_[a].offset < f.tensors_[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const TensorInfo& prev = f.tensors_[order[k - 1]];
      const TensorInfo& cur = f.tensors_[order[k]];
      if (prev.offset + prev.n_bytes > cur.offset) {
        ctx_ = fmt::format("tensor '{}'", cur.name);
        return fail(offset_field_at_[order[k]], "data [{}, {}) overlaps tensor '{}' data [{}, {})",
                    cur.offset, cur.offset + cur.n_bytes, prev.name, prev.offset,
                    prev.offset + prev.n_bytes);
      }
    }
    ctx_.clear();
    return {};
  }

  std::span<const uint8_t> bytes_;
  const std::string& name_;
  uint64_t pos_ = 0;
  uint64_t n_kv_ = 0;
  uint64_t n_tensors_ = 0;
  std::string ctx_;             // what is being read, for messages: "metadata 'general.name'"
  std::vector<uint64_t> path_;  // array item indices while inside (nested) arrays
  std::vector<uint64_t> offset_field_at_;  // file offset of each tensor's data-offset field
};

Result<GgufFile> GgufFile::parse(std::span<const uint8_t> bytes, std::string name) {
  GgufFile f;
  f.bytes_ = bytes;
  f.name_ = std::move(name);
  Parser p(bytes, f.name_);
  T9_TRY(p.run(f));
  return f;
}

Result<GgufFile> GgufFile::open(const std::string& path) {
  T9_ASSIGN_OR_RETURN(MappedFile m, MappedFile::open(path));
  auto map = std::make_shared<MappedFile>(std::move(m));
  T9_ASSIGN_OR_RETURN(GgufFile f, parse(map->bytes(), path));
  f.map_ = std::move(map);
  return f;
}

const Value* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace t9::gguf
