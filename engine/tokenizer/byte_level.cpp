#include "engine/tokenizer/byte_level.h"

#include <unordered_map>

#include "engine/text/utf8.h"

namespace nibble::tokenizer {
namespace {

// Printable Latin-1 bytes map to themselves; the other 68 bytes map to U+0100 upwards in order.
struct ByteTables {
  std::array<std::string, 256> encode;
  std::unordered_map<char32_t, unsigned char> decode;
  ByteTables() {
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
      nibble::text::append_utf8(encode[b], cp);
      decode[cp] = static_cast<unsigned char>(b);
    }
  }
};

const ByteTables& tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

const std::string& byte_to_unicode(unsigned char b) {
  return tables().encode[b];
}

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  const auto& enc = tables().encode;
  for (char c : bytes) out += enc[static_cast<unsigned char>(c)];
  return out;
}

std::optional<std::string> byte_level_to_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto& dec = tables().decode;
  for (char32_t cp : nibble::text::decode_utf8(text)) {
    auto it = dec.find(cp);
    if (it == dec.end()) return std::nullopt;
    out.push_back(static_cast<char>(it->second));
  }
  return out;
}

}  // namespace nibble::tokenizer
