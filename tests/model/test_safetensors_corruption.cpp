// Randomized corruption (fixed seed): hundreds of mutations of a small valid file
// (truncations, flipped header bytes, rewritten offsets and lengths) must each either load
// with every tensor inside the file or fail with a ModelError; never crash or read out of bounds
// (run under NIBBLE_SANITIZE=1 to check the latter).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine/model/safetensors.h"
#include "engine/model/safetensors_writer.h"
#include "tests/model/safetensors_fixture.h"
#include "tests/support/temp_dir.h"

namespace nibble::model {
namespace {

TEST(SafetensorsCorruption, MutatedFilesLoadCleanlyOrFailWithModelError) {
  nibble::testing::TempDir dir;
  auto valid = dir.path() / "valid.safetensors";
  write_safetensors(
      valid,
      {{"model.embed", DType::BF16, {4, 8}},
       {"model.w", DType::F32, {3, 5}},
       {"model.q", DType::U8, {4, 4}},
       {"model.s", DType::F8_E4M3, {4, 1}}},
      {{"format", "pt"}},
      [](std::size_t i, std::span<std::byte> out) {
        for (std::size_t j = 0; j < out.size(); ++j) out[j] = std::byte(i + j);
      },
      1);
  const std::string original = testing::read_all(valid);
  std::uint64_t header_len;
  std::memcpy(&header_len, original.data(), 8);

  std::mt19937_64 rng(20261123);
  auto pick = [&](std::size_t n) { return std::size_t(rng() % n); };
  const std::string digits = "0123456789";
  int loaded = 0, refused = 0;
  for (int iter = 0; iter < 600; ++iter) {
    std::string bytes = original;
    switch (iter % 6) {
      case 0:  // truncation anywhere
        bytes.resize(pick(bytes.size()));
        break;
      case 1:  // flip a random header byte
        bytes[8 + pick(header_len)] ^= char(1 + pick(255));
        break;
      case 2: {  // rewrite a digit in the header (offsets, shapes)
        std::size_t at = 8 + pick(header_len);
        for (std::size_t k = 0; k < header_len; ++k) {
          std::size_t p = 8 + (at - 8 + k) % header_len;
          if (std::isdigit(static_cast<unsigned char>(bytes[p]))) {
            bytes[p] = digits[pick(10)];
            break;
          }
        }
        break;
      }
      case 3: {  // corrupt the length prefix
        std::uint64_t len = header_len + (rng() % 64) - 32;
        if (iter % 12 == 3) len = rng();
        std::memcpy(bytes.data(), &len, 8);
        break;
      }
      case 4:  // insert or delete a header byte (shifts everything)
        if (rng() % 2)
          bytes.insert(8 + pick(header_len), 1, char(pick(256)));
        else
          bytes.erase(8 + pick(header_len), 1);
        break;
      case 5:  // several flips at once, anywhere
        for (int k = 0; k < 4; ++k) bytes[pick(bytes.size())] ^= char(1 << pick(8));
        break;
    }
    auto path = dir.path() / "mutant.safetensors";
    testing::write_all(path, bytes);
    try {
      auto f = SafetensorsFile::open(path);
      std::size_t checksum = 0;
      for (const auto& [name, view] : f->tensors()) {
        EXPECT_EQ(std::int64_t(view.bytes.size()),
                  view.numel() * std::int64_t(dtype_size(view.dtype)))
            << name;
        for (auto b : view.bytes) checksum += std::size_t(b);  // touches every byte (ASan)
      }
      (void)checksum;
      ++loaded;
    } catch (const ModelError& e) {
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
      ++refused;
    }
  }
  // Both outcomes occur, so the mutations really exercise the parser.
  EXPECT_GT(refused, 300);
  EXPECT_GT(loaded, 10);
}

}  // namespace
}  // namespace nibble::model
