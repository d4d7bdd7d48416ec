#include "engine/structured/utf8_ranges.h"

#include <algorithm>

namespace nibble::structured {
namespace {

int encoded_length(std::uint32_t cp) {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

std::vector<unsigned char> encode(std::uint32_t cp, int length) {
  switch (length) {
    case 1:
      return {(unsigned char)cp};
    case 2:
      return {(unsigned char)(0xC0 | (cp >> 6)), (unsigned char)(0x80 | (cp & 0x3F))};
    case 3:
      return {(unsigned char)(0xE0 | (cp >> 12)), (unsigned char)(0x80 | ((cp >> 6) & 0x3F)),
              (unsigned char)(0x80 | (cp & 0x3F))};
    default:
      return {(unsigned char)(0xF0 | (cp >> 18)), (unsigned char)(0x80 | ((cp >> 12) & 0x3F)),
              (unsigned char)(0x80 | ((cp >> 6) & 0x3F)), (unsigned char)(0x80 | (cp & 0x3F))};
  }
}

// lo and hi have the same encoded length. Splits until every byte position of the range is
// an independent interval, then emits one sequence of byte sets.
void same_length(GrammarBuilder& builder, std::uint32_t lo, std::uint32_t hi, int length,
                 std::vector<std::vector<Symbol>>& out) {
  for (int i = 1; i < length; ++i) {
    const std::uint32_t mask = (std::uint32_t(1) << (6 * i)) - 1;
    if ((lo & ~mask) == (hi & ~mask)) continue;
    if ((lo & mask) != 0) {
      same_length(builder, lo, lo | mask, length, out);
      same_length(builder, (lo | mask) + 1, hi, length, out);
      return;
    }
    if ((hi & mask) != mask) {
      same_length(builder, lo, (hi & ~mask) - 1, length, out);
      same_length(builder, hi & ~mask, hi, length, out);
      return;
    }
  }
  const std::vector<unsigned char> a = encode(lo, length), b = encode(hi, length);
  std::vector<Symbol> seq;
  for (int k = 0; k < length; ++k) {
    ByteSet set;
    set.add_range(a[std::size_t(k)], b[std::size_t(k)]);
    seq.push_back(builder.byte_set(set));
  }
  out.push_back(std::move(seq));
}

}  // namespace

void utf8_sequences(GrammarBuilder& builder, std::uint32_t lo, std::uint32_t hi,
                    std::vector<std::vector<Symbol>>& alternatives) {
  hi = std::min(hi, kMaxCodePoint);
  // Surrogates are not characters: UTF-8 never encodes them.
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) utf8_sequences(builder, lo, 0xD7FF, alternatives);
    if (hi > 0xDFFF) utf8_sequences(builder, 0xE000, hi, alternatives);
    return;
  }
  static constexpr std::uint32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  std::uint32_t start = lo;
  for (std::uint32_t end : kLengthEnds) {
    if (start > hi) break;
    if (start > end) continue;
    const std::uint32_t stop = std::min(hi, end);
    same_length(builder, start, stop, encoded_length(start), alternatives);
    start = stop + 1;
  }
}

std::vector<CodePointRange> normalize_ranges(std::vector<CodePointRange> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<CodePointRange> out;
  for (const CodePointRange& r : ranges) {
    if (!out.empty() && r.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, r.second);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::vector<CodePointRange> complement_ranges(const std::vector<CodePointRange>& ranges) {
  std::vector<CodePointRange> out;
  std::uint32_t next = 0;
  for (const CodePointRange& r : ranges) {
    if (r.first > next) out.push_back({next, r.first - 1});
    next = r.second + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

}  // namespace nibble::structured
