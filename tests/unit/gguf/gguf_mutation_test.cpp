// The reader against >= 100 broken variants of a valid file: each must give one Error that names
// the file and an offset and, for the targeted changes, the problem. Random byte flips must never
// crash (this binary also runs under ASan in sanitizer builds; scripts/fuzz.sh replays the same
// set through the fuzz target).
#include <gtest/gtest.h>

#include "gguf_mutations.h"

namespace t9::gguf {
namespace {

using testing::broken_variants;
using testing::Mutation;

TEST(GgufMutation, SampleIsValid) {
  const auto bytes = testing::sample_bytes();
  auto f = GgufFile::parse(bytes, "sample.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->tensors().size(), 4u);
  EXPECT_EQ(f->metadata().size(), 18u);
}

TEST(GgufMutation, Version2IsAccepted) {
  auto bytes = testing::sample_bytes();
  bytes[4] = 2;  // v2 and v3 share the little-endian layout
  auto f = GgufFile::parse(bytes, "v2.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->version(), 2u);
}

TEST(GgufMutation, EveryBrokenVariantIsRejected) {
  const std::vector<Mutation> variants = broken_variants();
  ASSERT_GE(variants.size(), 100u);
  size_t n_targeted = 0;
  for (const Mutation& m : variants) {
    auto f = GgufFile::parse(m.bytes, "bad.gguf");
    ASSERT_FALSE(f.ok()) << m.label << " was accepted";
    const std::string& msg = f.message();
    EXPECT_EQ(msg.rfind("bad.gguf: offset ", 0), 0u) << m.label << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << m.label << ": one line please: " << msg;
    if (!m.expect.empty()) {
      ++n_targeted;
      EXPECT_NE(msg.find(m.expect), std::string::npos)
          << m.label << ": expected '" << m.expect << "' in: " << msg;
    }
  }
  EXPECT_GE(n_targeted, 100u);
}

// Spot checks of exact messages: offset and wording, so a message regression is visible.
TEST(GgufMutation, ExactMessages) {
  const auto good = testing::sample_bytes();
  const testing::Layout l = testing::walk(good);
  auto msg_of = [](const std::vector<uint8_t>& b) {
    auto f = GgufFile::parse(b, "m.gguf");
    return f.ok() ? std::string("(accepted)") : f.message();
  };
  EXPECT_EQ(msg_of(testing::detail::with(good, 4, uint32_t{7})),
            "m.gguf: offset 4: unsupported GGUF version 7 (only versions 2 and 3 are supported)");
  const auto& t1 = l.tensors[1];
  EXPECT_EQ(msg_of(testing::detail::with(good, t1.offset_at, uint64_t{256})),
            fmt::format("m.gguf: offset {}: tensor 'norm.weight': data [256, 288) overlaps "
                        "tensor 'tok.weight' data [0, 288)",
                        t1.offset_at));
  const auto& kv = l.key("test.arr_str");
  EXPECT_EQ(msg_of(testing::detail::with(good, kv.count_at + 8 + 9, uint64_t{1000})),
            fmt::format("m.gguf: offset {}: metadata 'test.arr_str'[1]: string length 1000 "
                        "exceeds the {} bytes left in the file",
                        kv.count_at + 17, good.size() - (kv.count_at + 25)));
}

TEST(GgufMutation, RandomFlipsNeverCrash) {
  size_t n_ok = 0;
  for (const auto& b : testing::random_flips(2000, 1234)) {
    auto f = GgufFile::parse(b, "flip.gguf");
    if (!f.ok()) continue;
    ++n_ok;
    // Whatever was accepted must be internally consistent.
    for (const auto& t : f->tensors()) {
      ASSERT_LE(f->data_offset() + t.offset + t.n_bytes, b.size());
      ASSERT_EQ(t.offset % f->alignment(), 0u);
    }
  }
  // Flips inside string bytes or values keep the file valid; most others break it.
  EXPECT_GT(n_ok, 0u);
  EXPECT_LT(n_ok, 2000u);
}

}  // namespace
}  // namespace t9::gguf
