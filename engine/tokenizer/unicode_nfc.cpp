#include "engine/tokenizer/unicode_nfc.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

#include "engine/text/utf8.h"

namespace nibble::tokenizer {
namespace {

struct CombiningClass {
  char32_t cp;
  std::uint8_t ccc;
};
struct Decomposition {
  char32_t cp;
  std::uint16_t offset;
  std::uint8_t length;
};
struct Composition {
  char32_t first, second, composite;
};

#include "engine/tokenizer/nfc_tables.inc"

// Hangul syllables are composed arithmetically (Unicode 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

int combining_class(char32_t cp) {
  auto it = std::lower_bound(std::begin(kCombiningClasses), std::end(kCombiningClasses), cp,
                             [](const CombiningClass& c, char32_t v) { return c.cp < v; });
  return it != std::end(kCombiningClasses) && it->cp == cp ? it->ccc : 0;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  auto it = std::lower_bound(std::begin(kDecompositions), std::end(kDecompositions), cp,
                             [](const Decomposition& d, char32_t v) { return d.cp < v; });
  if (it != std::end(kDecompositions) && it->cp == cp) {
    out.insert(out.end(), kDecompositionData + it->offset,
               kDecompositionData + it->offset + it->length);
  } else {
    out.push_back(cp);
  }
}

// 0 when the pair has no primary composite.
char32_t compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount)
    return a + (b - kTBase);
  auto it =
      std::lower_bound(std::begin(kCompositions), std::end(kCompositions), std::pair{a, b},
                       [](const Composition& c, std::pair<char32_t, char32_t> v) {
                         return c.first < v.first || (c.first == v.first && c.second < v.second);
                       });
  return it != std::end(kCompositions) && it->first == a && it->second == b ? it->composite : 0;
}

}  // namespace

std::string to_nfc(std::string_view text) {
  const auto cps = nibble::text::decode_utf8(text);
  if (std::all_of(cps.begin(), cps.end(), [](char32_t c) { return c < kNfcFastLimit; }))
    return std::string(text);

  std::vector<char32_t> d;
  d.reserve(cps.size() + 8);
  for (char32_t cp : cps) decompose(cp, d);
  // Canonical ordering: stable sort of each run of non-starters by combining class.
  for (std::size_t i = 0; i < d.size();) {
    if (combining_class(d[i]) == 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < d.size() && combining_class(d[j]) != 0) ++j;
    std::stable_sort(d.begin() + i, d.begin() + j, [](char32_t a, char32_t b) {
      return combining_class(a) < combining_class(b);
    });
    i = j;
  }
  // Canonical composition.
  std::vector<char32_t> out;
  out.reserve(d.size());
  std::ptrdiff_t starter = -1;
  int last_ccc = -1;
  for (char32_t cp : d) {
    const int ccc = combining_class(cp);
    if (starter >= 0) {
      const bool blocked = last_ccc != -1 && (last_ccc == 0 || last_ccc >= ccc);
      if (!blocked) {
        if (char32_t c = compose(out[starter], cp)) {
          out[starter] = c;
          continue;
        }
      }
    }
    if (ccc == 0) {
      starter = static_cast<std::ptrdiff_t>(out.size());
      last_ccc = -1;
    } else {
      last_ccc = ccc;
    }
    out.push_back(cp);
  }
  std::string result;
  result.reserve(text.size());
  for (char32_t cp : out) nibble::text::append_utf8(result, cp);
  return result;
}

}  // namespace nibble::tokenizer
