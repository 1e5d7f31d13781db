// Building GGUF v3 files: metadata of every value type (nested arrays included) and tensors of any
// ggml type given as raw bytes. The layout follows gguf-py's GGUFWriter: header, metadata, tensor
// infos, padding to the alignment, then each tensor's data padded to the alignment. The alignment
// is `general.alignment` when set (UINT32, a power of two), else 32.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/result.h"
#include "gguf/gguf_file.h"
#include "quant/types.h"

namespace t9::gguf {

class GgufWriter {
 public:
  // Adds a key, or replaces the value of an existing one in place (its position is kept).
  void set(std::string key, Value value);
  // Copies `data`, which must hold exactly the tensor's bytes (rows of row_bytes(type, ne[0])).
  // ne is in ggml order (ne[0] contiguous), at most 4 dims, ne[0] a multiple of the block size.
  Status add_tensor(std::string name, std::vector<int64_t> ne, GgmlType type,
                    std::span<const uint8_t> data);

  // The whole file in memory (tests, fuzz corpora).
  Result<std::vector<uint8_t>> to_bytes() const;
  // Writes the file (header first, then tensor data streamed from memory).
  Status write_file(const std::string& path) const;

  size_t n_tensors() const { return tensors_.size(); }
  size_t n_metadata() const { return kv_.size(); }

 private:
  struct Tensor {
    TensorInfo info;  // offset filled in by layout()
    std::vector<uint8_t> data;
  };
  Result<uint64_t> alignment() const;
  // Checks the values, computes tensor offsets and serializes everything before the data
  // section (padding included).
  Result<std::vector<uint8_t>> header(std::vector<uint64_t>& offsets) const;

  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<Tensor> tensors_;
  std::unordered_map<std::string, size_t> kv_index_;  // key -> index in kv_
  std::unordered_set<std::string> tensor_names_;
};

}  // namespace t9::gguf
