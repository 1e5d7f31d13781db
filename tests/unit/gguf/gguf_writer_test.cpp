// Writer -> reader round trip in memory, and writer input checks.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "gguf_mutations.h"

namespace t9::gguf {
namespace {

TEST(GgufWriter, RoundTripEveryValueType) {
  GgufWriter w = testing::sample_writer();
  auto bytes = w.to_bytes();
  ASSERT_TRUE(bytes.ok()) << bytes.message();
  auto f = GgufFile::parse(*bytes, "rt.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->get<uint8_t>("test.u8").value(), 200);
  EXPECT_EQ(f->get<int8_t>("test.i8").value(), -100);
  EXPECT_EQ(f->get<uint16_t>("test.u16").value(), 60000);
  EXPECT_EQ(f->get<int16_t>("test.i16").value(), -30000);
  EXPECT_EQ(f->get<uint32_t>("test.u32").value(), 4000000000u);
  EXPECT_EQ(f->get<int32_t>("test.i32").value(), -2000000000);
  EXPECT_EQ(f->get<uint64_t>("test.u64").value(), 18000000000000000000ull);
  EXPECT_EQ(f->get<int64_t>("test.i64").value(), -9000000000000000000ll);
  EXPECT_EQ(f->get<float>("test.f32").value(), 1.5f);
  EXPECT_EQ(f->get<double>("test.f64").value(), -2.25);
  EXPECT_EQ(f->get<bool>("test.bool").value(), true);
  EXPECT_EQ(f->get<std::string>("test.str").value(), "h\xC3\xA9llo");
  EXPECT_EQ(f->get_array<std::string>("test.arr_str").value(),
            (std::vector<std::string>{"a", "bc", ""}));
  EXPECT_EQ(f->get_array<int>("test.arr_u8").value(), (std::vector<int>{1, 2}));
  EXPECT_TRUE(f->get_array<float>("test.empty").value().empty());
  // Exact on-disk types survive, nested arrays included.
  EXPECT_EQ(f->find("test.u16")->type, ValueType::UINT16);
  const Value* nested = f->find("test.nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(*nested, Value::array(ValueType::ARRAY,
                                  {Value::array(ValueType::INT32, {Value::i32(1), Value::i32(-2)}),
                                   Value::array(ValueType::INT32, {Value::i32(3)})}));
  // int32 -1 -> uint32 refused by range, -2 fits int8.
  EXPECT_FALSE(f->get<uint32_t>("test.i8").ok());
  // Tensors: offsets follow gguf-py's layout (each tensor padded to 32 bytes): Q4_K 2 blocks of
  // 144 = 288 -> 288; F32 x8 = 32 -> 320; Q8_0 3 blocks of 34 = 102 -> 422, padded to 448.
  ASSERT_EQ(f->tensors().size(), 4u);
  const std::vector<uint64_t> offsets = {0, 288, 320, 448};
  const std::vector<uint32_t> seeds = {1, 2, 3, 4};
  for (size_t i = 0; i < 4; ++i) {
    const TensorInfo& t = f->tensors()[i];
    EXPECT_EQ(t.offset, offsets[i]) << t.name;
    auto expect = testing::pattern_bytes(t.n_bytes, seeds[i]);
    auto got = f->tensor_bytes(t);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), expect.begin(), expect.end())) << t.name;
    EXPECT_EQ((f->tensor_data(t) - bytes->data()) % 32, 0);
  }
  EXPECT_EQ(f->find_tensor("blk.0.k")->ne, (std::vector<int64_t>{4, 2, 1}));
  EXPECT_EQ(f->find_tensor("blk.0.k")->n_elements, 8);
  EXPECT_EQ(bytes->size() % 32, 0u);
  EXPECT_EQ(bytes->size(), f->data_offset() + 448 + 32);
}

TEST(GgufWriter, AlignmentKeyIsHonoured) {
  auto bytes = testing::sample_writer(256).to_bytes();
  ASSERT_TRUE(bytes.ok());
  auto f = GgufFile::parse(*bytes, "a.gguf");
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->alignment(), 256u);
  EXPECT_EQ(f->data_offset() % 256, 0u);
  for (const auto& t : f->tensors()) EXPECT_EQ(t.offset % 256, 0u) << t.name;
}

TEST(GgufWriter, FileMatchesMemory) {
  GgufWriter w = testing::sample_writer();
  const std::string path = std::string(TEMPO9_BINARY_DIR) + "/gguf_writer_test.gguf";
  ASSERT_TRUE(w.write_file(path).ok());
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> disk((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(disk, w.to_bytes().value());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->tensors().size(), 4u);
  std::remove(path.c_str());
}

TEST(GgufWriter, RejectsBadInput) {
  GgufWriter w;
  std::vector<uint8_t> d(144);
  EXPECT_NE(w.add_tensor("x", {128}, GgmlType::Q4_K, d).message().find("not a multiple"),
            std::string::npos);
  EXPECT_NE(w.add_tensor("x", {256}, GgmlType::Q4_K, std::span(d).first(100))
                .message()
                .find("100 bytes given"),
            std::string::npos);
  EXPECT_TRUE(w.add_tensor("x", {256}, GgmlType::Q4_K, d).ok());
  EXPECT_NE(w.add_tensor("x", {256}, GgmlType::Q4_K, d).message().find("added twice"),
            std::string::npos);
  EXPECT_FALSE(w.add_tensor("y", {1, 1, 1, 1, 1}, GgmlType::F32, d).ok());
  w.set("bad", Value{ValueType::UINT8, uint64_t{300}});
  EXPECT_NE(w.to_bytes().message().find("'bad': value does not fit"), std::string::npos);
  w.set("bad", Value::array(ValueType::INT32, {Value::u8(1)}));
  EXPECT_NE(w.to_bytes().message().find("array of INT32 has a UINT8"), std::string::npos);
  w.set("bad", Value::u8(1));
  w.set("general.alignment", Value::u32(24));
  EXPECT_NE(w.to_bytes().message().find("power of two"), std::string::npos);
}

}  // namespace
}  // namespace t9::gguf
