// safetensors reading: valid files round-trip through the writer; every malformed header
// gives a ModelError naming the file and the tensor.
#include "engine/model/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "engine/model/safetensors_writer.h"
#include "tests/model/safetensors_fixture.h"
#include "tests/support/temp_dir.h"

namespace nibble::model {
namespace {

using ::testing::HasSubstr;
using testing::write_raw_safetensors;

std::string error_of(const std::filesystem::path& path) {
  try {
    SafetensorsFile::open(path);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Safetensors, WriterOutputReadsBackWithShapesDtypesBytesAndMetadata) {
  nibble::testing::TempDir dir;
  auto path = dir.path() / "model.safetensors";
  std::vector<TensorSpec> specs = {
      {"a", DType::F32, {2, 3}}, {"b", DType::U8, {5}}, {"c", DType::BF16, {}}};
  write_safetensors(
      path, specs, {{"format", "pt"}},
      [](std::size_t i, std::span<std::byte> out) {
        for (std::size_t j = 0; j < out.size(); ++j) out[j] = std::byte(i * 16 + j);
      },
      2);
  auto f = SafetensorsFile::open(path);
  ASSERT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  const auto* a = f->find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::F32);
  EXPECT_EQ(a->shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(a->bytes.size(), 24u);
  EXPECT_EQ(a->bytes[5], std::byte(5));
  const auto* b = f->find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->bytes[4], std::byte(16 + 4));
  EXPECT_EQ(f->find("c")->numel(), 1);
  EXPECT_EQ(f->find("c")->bytes[1], std::byte(33));
  EXPECT_EQ(f->find("missing"), nullptr);
}

struct BadHeaderCase {
  const char* label;
  std::string header;
  std::string data;
  std::vector<std::string> expected;  // substrings of the error
};

TEST(Safetensors, MalformedHeadersGiveErrorsNamingFileAndTensor) {
  nibble::testing::TempDir dir;
  const std::string eight(8, '\0');
  std::vector<BadHeaderCase> cases = {
      {"not json", "{\"a\": ", eight, {"not valid JSON"}},
      {"not object", "[1,2]", eight, {"JSON object"}},
      {"unknown dtype",
       R"({"w":{"dtype":"F7","shape":[2],"data_offsets":[0,8]}})",
       eight,
       {"'w'", "unknown dtype 'F7'"}},
      {"past end",
       R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
       eight,
       {"'w'", "past the data section"}},
      {"size mismatch",
       R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
       eight,
       {"'w'", "needs 12"}},
      {"negative dim",
       R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,8]}})",
       eight,
       {"'w'", "non-negative"}},
      {"begin after end",
       R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[8,0]}})",
       eight,
       {"'w'", "begin > end"}},
      {"overlap",
       R"({"x":{"dtype":"U8","shape":[6],"data_offsets":[0,6]},"y":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
       eight,
       {"'y'", "overlaps tensor 'x'"}},
      {"duplicate",
       R"({"x":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"x":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
       eight,
       {"'x'", "twice"}},
      {"missing offsets", R"({"w":{"dtype":"U8","shape":[4]}})", eight, {"'w'", "data_offsets"}},
      {"huge shape",
       R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
       eight,
       {"'w'", "impossibly large"}},
      {"bad metadata", R"({"__metadata__":{"k":1}})", eight, {"__metadata__"}},
      {"too deep", R"({"w":[[[[[[[[1]]]]]]]]})", eight, {"nests deeper than 8"}},
  };
  for (const auto& c : cases) {
    auto path = dir.path() / "bad.safetensors";
    write_raw_safetensors(path, c.header, c.data);
    std::string err = error_of(path);
    EXPECT_THAT(err, HasSubstr(path.string())) << c.label;
    for (const auto& e : c.expected) EXPECT_THAT(err, HasSubstr(e)) << c.label;
  }
}

TEST(Safetensors, HeaderLengthBeyondLimitOrFileIsRefused) {
  nibble::testing::TempDir dir;
  auto path = dir.path() / "len.safetensors";
  std::string bytes(16, '\0');
  std::uint64_t len = kMaxSafetensorsHeaderBytes + 1;
  std::memcpy(bytes.data(), &len, 8);
  testing::write_all(path, bytes);
  EXPECT_THAT(error_of(path), HasSubstr("exceeds the limit"));
  len = 9;
  std::memcpy(bytes.data(), &len, 8);
  testing::write_all(path, bytes);
  EXPECT_THAT(error_of(path), HasSubstr("past the end of the file"));
  testing::write_all(path, "abc");
  EXPECT_THAT(error_of(path), HasSubstr("too short"));
  EXPECT_THAT(error_of(dir.path() / "absent.safetensors"), HasSubstr("cannot open"));
}

TEST(Checkpoint, ShardedIndexJoinsShardsAndChecksTheMap) {
  nibble::testing::TempDir dir;
  auto fill = [](std::size_t, std::span<std::byte> out) {
    for (auto& b : out) b = std::byte(7);
  };
  write_safetensors(dir.path() / "model-00001-of-00002.safetensors", {{"a", DType::F32, {2}}}, {},
                    fill, 1);
  write_safetensors(dir.path() / "model-00002-of-00002.safetensors", {{"b", DType::BF16, {3}}}, {},
                    fill, 1);
  testing::write_all(dir.path() / "model.safetensors.index.json",
                     R"({"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors",)"
                     R"("b":"model-00002-of-00002.safetensors"}})");
  auto ck = Checkpoint::open(dir.path());
  EXPECT_EQ(ck.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ck.require("b").numel(), 3);
  EXPECT_EQ(ck.require("a").bytes.size(), 8u);
  try {
    ck.require("zzz");
    ADD_FAILURE() << "no error";
  } catch (const ModelError& e) {
    EXPECT_THAT(e.what(), HasSubstr("missing tensor 'zzz'"));
  }

  // The index points a tensor at the wrong shard.
  testing::write_all(dir.path() / "model.safetensors.index.json",
                     R"({"weight_map":{"a":"model-00002-of-00002.safetensors",)"
                     R"("b":"model-00002-of-00002.safetensors"}})");
  try {
    Checkpoint::open(dir.path());
    ADD_FAILURE() << "no error";
  } catch (const ModelError& e) {
    EXPECT_THAT(e.what(), HasSubstr("tensor 'a' is listed in model-00002-of-00002.safetensors"));
  }
  // A shard outside the directory.
  testing::write_all(dir.path() / "model.safetensors.index.json",
                     R"({"weight_map":{"a":"../x.safetensors"}})");
  EXPECT_THROW(Checkpoint::open(dir.path()), ModelError);
}

TEST(Checkpoint, EmptyDirectoryIsAClearError) {
  nibble::testing::TempDir dir;
  try {
    Checkpoint::open(dir.path());
    ADD_FAILURE() << "no error";
  } catch (const ModelError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no model.safetensors"));
  }
}

}  // namespace
}  // namespace nibble::model
