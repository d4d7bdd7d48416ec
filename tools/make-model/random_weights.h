#pragma once
// Deterministic random weights: element i of the tensor named `name` is a pure function of
// (seed, name, i), so any thread can produce any slice and a seed always gives the same model.
#include <cstdint>
#include <string_view>

namespace nibble::tools {

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline std::uint64_t tensor_stream(std::uint64_t seed, std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the name
  for (char c : name) h = (h ^ std::uint8_t(c)) * 0x100000001b3ull;
  return splitmix64(seed ^ splitmix64(h));
}

// Uniform in [-1, 1) with 24 random bits; exact in float, no libm, identical on every machine.
inline float uniform_at(std::uint64_t stream, std::uint64_t index) {
  const std::uint64_t bits = splitmix64(stream + index) >> 40;
  return float(std::int64_t(bits) - (1 << 23)) / float(1 << 23);
}

}  // namespace nibble::tools
