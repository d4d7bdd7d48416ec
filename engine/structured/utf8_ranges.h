#pragma once
// Unicode code point ranges as byte-level grammar alternatives: [lo, hi] becomes a few
// sequences of byte sets whose union encodes exactly those code points in UTF-8 (surrogates
// excluded). This is how character classes of regexes and JSON strings reach a byte grammar.
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/structured/grammar.h"

namespace nibble::structured {

using CodePointRange = std::pair<std::uint32_t, std::uint32_t>;  // inclusive
constexpr std::uint32_t kMaxCodePoint = 0x10FFFF;

// Appends to `alternatives` one symbol sequence per aligned sub-range of [lo, hi].
void utf8_sequences(GrammarBuilder& builder, std::uint32_t lo, std::uint32_t hi,
                    std::vector<std::vector<Symbol>>& alternatives);

// Sorted, merged, non-overlapping ranges.
std::vector<CodePointRange> normalize_ranges(std::vector<CodePointRange> ranges);
// Everything in [0, kMaxCodePoint] not in `ranges` (which must be normalized).
std::vector<CodePointRange> complement_ranges(const std::vector<CodePointRange>& ranges);

}  // namespace nibble::structured
