#pragma once
// A deterministic mixed-script text corpus (English, code, numbers, whitespace runs, CJK,
// Cyrillic, Arabic, accents and combining marks, emoji with ZWJ sequences, special-token-like
// strings) for the tokenizer benchmark and the randomized oracle check. Same seed, same bytes,
// on every platform (own PRNG arithmetic, no std distributions).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nibble::tokenizer::testing {

// Lines of roughly 40..240 bytes until `total_bytes` is reached; no line contains '\n'.
std::vector<std::string> mixed_corpus_lines(std::size_t total_bytes, std::uint64_t seed);

}  // namespace nibble::tokenizer::testing
