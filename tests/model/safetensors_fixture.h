#pragma once
// Hand-built safetensors files for tests: a raw header string and data bytes, written as-is,
// so tests can produce files our writer never would (bad offsets, duplicates, truncation).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace nibble::model::testing {

inline void write_raw_safetensors(const std::filesystem::path& path, const std::string& header,
                                  const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  std::uint64_t len = header.size();
  for (int i = 0; i < 8; ++i) out.put(char((len >> (8 * i)) & 0xff));
  out << header << data;
}

inline std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_all(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

}  // namespace nibble::model::testing
