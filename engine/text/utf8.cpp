#include "engine/text/utf8.h"

namespace nibble::text {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

// Valid range of the second byte for a lead byte (Unicode Table 3-7); the rest are 80..BF.
bool second_byte_ok(unsigned char lead, unsigned char b) {
  if (lead == 0xE0) return b >= 0xA0 && b <= 0xBF;
  if (lead == 0xED) return b >= 0x80 && b <= 0x9F;
  if (lead == 0xF0) return b >= 0x90 && b <= 0xBF;
  if (lead == 0xF4) return b >= 0x80 && b <= 0x8F;
  return b >= 0x80 && b <= 0xBF;
}

std::size_t expected_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;  // never valid as a lead
}

// Number of bytes from `pos` that form a valid prefix of a sequence (0 if the lead is invalid)
// and whether the sequence is complete.
std::size_t valid_prefix(std::string_view s, std::size_t pos, bool& complete) {
  const auto lead = static_cast<unsigned char>(s[pos]);
  const std::size_t need = expected_length(lead);
  complete = false;
  if (need == 0) return 0;
  if (need == 1) {
    complete = true;
    return 1;
  }
  std::size_t n = 1;
  while (n < need && pos + n < s.size()) {
    const auto b = static_cast<unsigned char>(s[pos + n]);
    const bool ok = n == 1 ? second_byte_ok(lead, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return n;
    ++n;
  }
  complete = n == need;
  return n;
}

}  // namespace

std::string sanitize_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    bool complete = false;
    const std::size_t n = valid_prefix(bytes, pos, complete);
    if (complete) {
      out.append(bytes.substr(pos, n));
      pos += n;
    } else {
      // An invalid lead, or a truncated sequence: its maximal valid prefix becomes one U+FFFD.
      append_utf8(out, kReplacement);
      pos += n == 0 ? 1 : n;
    }
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::size_t utf8_sequence_length(unsigned char lead) {
  const std::size_t n = expected_length(lead);
  return n == 0 ? 1 : n;
}

std::vector<char32_t> decode_utf8(std::string_view text) {
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto lead = static_cast<unsigned char>(text[pos]);
    std::size_t n = utf8_sequence_length(lead);
    if (pos + n > text.size()) n = text.size() - pos;
    char32_t cp = n == 1 ? lead : lead & (0xFF >> (n + 1));
    for (std::size_t i = 1; i < n; ++i)
      cp = (cp << 6) | (static_cast<unsigned char>(text[pos + i]) & 0x3F);
    cps.push_back(cp);
    pos += n;
  }
  return cps;
}

std::u32string to_code_points(std::string_view bytes) {
  const std::vector<char32_t> cps = decode_utf8(sanitize_utf8(bytes));
  return std::u32string(cps.begin(), cps.end());
}

std::string from_code_points(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t cp : code_points) append_utf8(out, cp);
  return out;
}

std::size_t complete_utf8_prefix(std::string_view bytes) {
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    bool complete = false;
    const std::size_t n = valid_prefix(bytes, pos, complete);
    if (complete || n == 0) {
      pos += n == 0 ? 1 : n;
      continue;
    }
    // A valid but truncated sequence at the very end may still complete; one cut short by a
    // bad byte cannot and is emitted (as U+FFFD by the caller).
    if (pos + n == bytes.size()) return pos;
    pos += n;
  }
  return pos;
}

}  // namespace nibble::text
