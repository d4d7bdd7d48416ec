// Tokenizer throughput: encodes a 1 MB mixed corpus (fixed seed) line by line and prints
// tokens/s, first with a cold pre-token cache, then warm.
//   bench_tokenizer MODEL_DIR [--bytes N] [--write-corpus FILE]
// Compare with transformers.js on the same corpus:
//   node tests/oracle/tokenizer/encode.mjs --bench FILE <name>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "engine/tokenizer/tokenizer.h"
#include "tests/tokenizer/mixed_corpus.h"

namespace {

constexpr std::uint64_t kSeed = 20261123;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help")) {
    std::fprintf(stderr, "usage: bench_tokenizer MODEL_DIR [--bytes N] [--write-corpus FILE]\n");
    return 2;
  }
  std::size_t bytes = 1 << 20;
  std::string corpus_out;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--bytes")) bytes = std::stoul(argv[i + 1]);
    if (!std::strcmp(argv[i], "--write-corpus")) corpus_out = argv[i + 1];
  }
  const auto lines = nibble::tokenizer::testing::mixed_corpus_lines(bytes, kSeed);
  bytes = 0;
  for (const auto& line : lines) bytes += line.size();
  if (!corpus_out.empty()) {
    std::ofstream out(corpus_out, std::ios::binary);
    for (std::size_t i = 0; i < lines.size(); ++i)
      out << lines[i] << (i + 1 < lines.size() ? "\n" : "");
  }
  try {
    auto start = std::chrono::steady_clock::now();
    const auto tok = nibble::tokenizer::Tokenizer::from_directory(argv[1]);
    const double load_s = seconds_since(start);
    for (const char* pass : {"cold", "warm"}) {
      start = std::chrono::steady_clock::now();
      std::size_t tokens = 0;
      for (const auto& line : lines) tokens += tok.encode(line).size();
      const double s = seconds_since(start);
      std::printf(
          "%s: %zu lines, %zu bytes, %zu tokens, %s cache: %.3f s, %.0f tokens/s, %.1f MB/s (load "
          "%.2f s)\n",
          argv[1], lines.size(), bytes, tokens, pass, s, tokens / s, bytes / s / 1e6, load_s);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
    return 1;
  }
  return 0;
}
