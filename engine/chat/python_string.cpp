#include "engine/chat/python_string.h"

#include <stdexcept>

#include "engine/text/utf8.h"

namespace nibble::chat {

bool is_python_space(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::string py_strip(const std::string& s, const std::optional<std::string>& chars,
                     StripSide side) {
  const std::u32string cps = nibble::text::to_code_points(s);
  const std::u32string set = chars ? nibble::text::to_code_points(*chars) : std::u32string();
  auto strip_me = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : is_python_space(c);
  };
  size_t b = 0, e = cps.size();
  if (side != StripSide::Right)
    while (b < e && strip_me(cps[b])) ++b;
  if (side != StripSide::Left)
    while (e > b && strip_me(cps[e - 1])) --e;
  return nibble::text::from_code_points(std::u32string_view(cps).substr(b, e - b));
}

std::vector<std::string> py_split(const std::string& s, const std::optional<std::string>& sep,
                                  long maxsplit) {
  std::vector<std::string> out;
  if (!sep) {
    const std::u32string cps = nibble::text::to_code_points(s);
    size_t i = 0;
    while (true) {
      while (i < cps.size() && is_python_space(cps[i])) ++i;
      if (i >= cps.size()) break;
      if (maxsplit >= 0 && static_cast<long>(out.size()) == maxsplit) {
        size_t e = cps.size();
        while (e > i && is_python_space(cps[e - 1])) --e;
        out.push_back(nibble::text::from_code_points(std::u32string_view(cps).substr(i, e - i)));
        break;
      }
      size_t j = i;
      while (j < cps.size() && !is_python_space(cps[j])) ++j;
      out.push_back(nibble::text::from_code_points(std::u32string_view(cps).substr(i, j - i)));
      i = j;
    }
    return out;
  }
  if (sep->empty()) throw std::invalid_argument("empty separator");
  size_t start = 0;
  while (maxsplit < 0 || static_cast<long>(out.size()) < maxsplit) {
    const size_t at = s.find(*sep, start);
    if (at == std::string::npos) break;
    out.push_back(s.substr(start, at - start));
    start = at + sep->size();
  }
  out.push_back(s.substr(start));
  return out;
}

std::vector<std::string> py_rsplit(const std::string& s, const std::string& sep, long maxsplit) {
  if (sep.empty()) throw std::invalid_argument("empty separator");
  std::vector<std::string> out;
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<long>(out.size()) < maxsplit) {
    if (end < sep.size()) break;
    const size_t at = s.rfind(sep, end - sep.size());
    if (at == std::string::npos) break;
    out.insert(out.begin(), s.substr(at + sep.size(), end - at - sep.size()));
    end = at;
  }
  out.insert(out.begin(), s.substr(0, end));
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& with,
                       long count) {
  std::string out;
  if (old.empty()) {  // Python inserts `with` between every code point
    const std::u32string cps = nibble::text::to_code_points(s);
    long n = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || n < count) {
        out += with;
        ++n;
      }
      if (i < cps.size()) nibble::text::append_utf8(out, cps[i]);
    }
    return out;
  }
  size_t start = 0;
  long n = 0;
  while (count < 0 || n < count) {
    const size_t at = s.find(old, start);
    if (at == std::string::npos) break;
    out += s.substr(start, at - start) + with;
    start = at + old.size();
    ++n;
  }
  return out + s.substr(start);
}

namespace {
bool all_ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}
}  // namespace

std::optional<std::string> ascii_upper(const std::string& s) {
  if (!all_ascii(s)) return std::nullopt;
  std::string out = s;
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

std::optional<std::string> ascii_lower(const std::string& s) {
  if (!all_ascii(s)) return std::nullopt;
  std::string out = s;
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::optional<std::string> ascii_capitalize(const std::string& s) {
  auto lower = ascii_lower(s);
  if (!lower) return std::nullopt;
  if (!lower->empty() && (*lower)[0] >= 'a' && (*lower)[0] <= 'z')
    (*lower)[0] = static_cast<char>((*lower)[0] - 'a' + 'A');
  return lower;
}

}  // namespace nibble::chat
