// libFuzzer target for the GGUF reader (built by scripts/fuzz.sh with ASan + UBSan). Any input
// must either be rejected with a message or yield a file whose every accessor is safe to call;
// an accepted file must also survive a writer round trip: writing it again and re-reading gives
// the same bytes (the writer's output is a fixed point).
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/check.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

using namespace t9;
using namespace t9::gguf;

namespace {

void touch_accessors(const GgufFile& f) {
  for (const auto& [key, v] : f.metadata()) {
    T9_CHECK(f.find(key) == &v, "find('{}') disagrees with metadata()", key);
    (void)f.get<uint32_t>(key);
    (void)f.get<int64_t>(key);
    (void)f.get<float>(key);
    (void)f.get<bool>(key);
    (void)f.get<std::string>(key);
    (void)f.get_array<std::string>(key);
    (void)f.get_array<int32_t>(key);
    (void)f.get_array<double>(key);
  }
  volatile uint8_t sink = 0;
  for (const auto& t : f.tensors()) {
    T9_CHECK(f.find_tensor(t.name) == &t, "find_tensor('{}') disagrees", t.name);
    const auto bytes = f.tensor_bytes(t);
    // ASan flags these if the reader let a tensor reach outside the input.
    if (!bytes.empty()) sink = sink ^ bytes.front() ^ bytes.back();
  }
}

std::vector<uint8_t> rewrite(const GgufFile& f) {
  GgufWriter w;
  for (const auto& [key, v] : f.metadata()) w.set(key, v);
  for (const auto& t : f.tensors()) {
    Status s = w.add_tensor(t.name, t.ne, t.type, f.tensor_bytes(t));
    T9_CHECK(s.ok(), "writer refused a tensor the reader accepted: {}", s.message());
  }
  auto bytes = w.to_bytes();
  T9_CHECK(bytes.ok(), "writer refused a file the reader accepted: {}", bytes.message());
  return std::move(bytes).value();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!f.ok()) {
    T9_CHECK(f.message().rfind("fuzz.gguf: offset ", 0) == 0, "message without offset: {}",
             f.message());
    return 0;
  }
  touch_accessors(*f);
  const std::vector<uint8_t> once = rewrite(*f);
  auto again = GgufFile::parse(once, "rewritten.gguf");
  T9_CHECK(again.ok(), "our own output was rejected: {}", again.message());
  T9_CHECK(again->metadata().size() == f->metadata().size() &&
               again->tensors().size() == f->tensors().size(),
           "round trip changed the counts");
  T9_CHECK(rewrite(*again) == once, "writer output is not a fixed point");
  return 0;
}
