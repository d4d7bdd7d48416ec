#include "tests/tokenizer/mixed_corpus.h"

#include "engine/text/utf8.h"

namespace nibble::tokenizer::testing {
namespace {

// splitmix64: tiny, fully specified, so the corpus is the same everywhere.
struct Rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

const char* const kWords[] = {"the",     "of",        "and",     "tokenizer", "serving",
                              "model",   "quantized", "weights", "is",        "a",
                              "fast",    "NVFP4",     "kernel",  "Hello",     "World",
                              "don't",   "we'll",     "it's",    "GPU",       "throughput",
                              "latency", "batch",     "request", "streaming", "cache"};
const char* const kCode[] = {"for (int i = 0; i < n; ++i) {",
                             "return x * y + z;",
                             "def f(a, b):",
                             "    pass",
                             "std::vector<int> v{1, 2, 3};",
                             "if (!ok) { throw std::runtime_error(\"bad\"); }",
                             "SELECT * FROM t WHERE id = 42;",
                             "x = [i ** 2 for i in range(10)]",
                             "#include <cstdio>",
                             "const y = await fetch(`/api/${id}`);"};
const char* const kEmoji[] = {
    "😀",      "👍🏽", "🇺🇸", "🏳️‍🌈", "👨‍👩‍👧‍👦",
    "❤️", "✨",        "🎉",  "🤖",           "🚀"};
const char* const kOther[] = {"Привет",     "мир",           "مرحبا",
                              "שלום",       "café",          "naïve",
                              "Ünïcödé",    "e\xCC\x81",     "a\xCC\x88\xCC\xA3",
                              "ＡＢＣ",     "한국어",        "日本語",
                              "ひらがな",   "カタカナ",      "<|im_start|>",
                              "<|im_end|>", "<|endoftext|>", "<|eot_id|>",
                              "<bos>",      "∑ᵢ xᵢ²"};
constexpr char kPunctuation[] = ".,;:!?()[]{}\"'-/";
const char* const kSpaces[] = {" ",  " ",    " ",    "  ",     "    ",
                               "\t", "\t\t", " \t ", "\u00a0", "\u3000"};

template <std::size_t N>
const char* pick(Rng& rng, const char* const (&list)[N]) {
  return list[rng.below(N)];
}

void append_fragment(Rng& rng, std::string& line) {
  switch (rng.below(10)) {
    case 0:
    case 1:
    case 2:
      line += pick(rng, kWords);
      break;
    case 3:
      line += pick(rng, kCode);
      break;
    case 4: {  // a number of 1..24 digits, sometimes with a decimal point
      const std::size_t digits = 1 + rng.below(24);
      for (std::size_t i = 0; i < digits; ++i)
        line.push_back(static_cast<char>('0' + rng.below(10)));
      if (rng.below(3) == 0) line += "." + std::to_string(rng.below(1000));
      break;
    }
    case 5: {  // 1..12 CJK ideographs
      const std::size_t n = 1 + rng.below(12);
      for (std::size_t i = 0; i < n; ++i)
        nibble::text::append_utf8(line, static_cast<char32_t>(0x4E00 + rng.below(0x5000)));
      break;
    }
    case 6:
      line += pick(rng, kEmoji);
      break;
    case 7:
      line += pick(rng, kOther);
      break;
    case 8:
      line.push_back(kPunctuation[rng.below(sizeof(kPunctuation) - 1)]);
      break;
    default:
      line += pick(rng, kSpaces);
      break;
  }
}

}  // namespace

std::vector<std::string> mixed_corpus_lines(std::size_t total_bytes, std::uint64_t seed) {
  Rng rng{seed};
  std::vector<std::string> lines;
  std::size_t size = 0;
  while (size < total_bytes) {
    std::string line;
    const std::size_t target = 40 + rng.below(200);
    while (line.size() < target) {
      append_fragment(rng, line);
      if (rng.below(2) == 0) line.push_back(' ');
    }
    size += line.size() + 1;
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace nibble::tokenizer::testing
