#include "http/request_head.h"

#include <strings.h>

#include <array>
#include <optional>

namespace nibble::http {
namespace {

HeadScan refuse(int status, std::string reason) {
  return {HeadScan::State::kRefused, 0, status, std::move(reason)};
}

// RFC 9110 token characters (header names, methods).
bool is_token_char(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  for (char t : std::string_view("!#$%&'*+-.^_`|~"))
    if (c == static_cast<unsigned char>(t)) return true;
  return false;
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!is_token_char(c)) return false;
  return true;
}

std::optional<std::string> request_line_error(std::string_view line) {
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return "the request line is not METHOD TARGET HTTP/1.x";
  if (!is_token(line.substr(0, sp1))) return "the request method is not a token";
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (target.empty()) return "the request target is empty";
  for (unsigned char c : target)
    if (c <= 0x20 || c == 0x7f) return "the request target holds a control character";
  const std::string_view version = line.substr(sp2 + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return "the HTTP version is not 1.0 or 1.1";
  return std::nullopt;
}

// The headers that must not appear twice: a second Authorization or Host is ambiguous (which
// one did the check see?), two framings of one body are how requests are smuggled.
constexpr std::array<const char*, 4> kSingletons = {"Authorization", "Host", "Content-Length",
                                                    "Transfer-Encoding"};

}  // namespace

HeadScan scan_request_head(std::string_view received, const HeadLimits& limits) {
  std::array<int, kSingletons.size()> seen{};
  std::size_t headers = 0;
  std::size_t pos = 0;
  for (bool request_line = true;; request_line = false) {
    const std::size_t lf = received.find('\n', pos);
    const std::size_t line_end = lf == std::string_view::npos ? received.size() : lf + 1;
    if (line_end - pos > limits.max_line_bytes + 2) {
      return request_line ? refuse(414, "the request line is longer than the limit of " +
                                            std::to_string(limits.max_line_bytes) + " bytes")
                          : refuse(431, "a header line is longer than the limit of " +
                                            std::to_string(limits.max_line_bytes) + " bytes");
    }
    if (line_end > limits.max_head_bytes) {
      return refuse(431, "the request head is larger than the limit of " +
                             std::to_string(limits.max_head_bytes) + " bytes");
    }
    if (lf == std::string_view::npos) return {};  // incomplete
    if (lf == pos || received[lf - 1] != '\r')
      return refuse(400, "a head line does not end in CRLF");
    const std::string_view line = received.substr(pos, lf - 1 - pos);
    pos = lf + 1;
    if (request_line) {
      if (auto error = request_line_error(line)) return refuse(400, *error);
      continue;
    }
    if (line.empty()) {
      if (seen[2] > 0 && seen[3] > 0)
        return refuse(400, "the request has both Content-Length and Transfer-Encoding");
      return {HeadScan::State::kComplete, pos, 0, {}};
    }
    if (++headers > limits.max_headers) {
      return refuse(431, "the request has more than the limit of " +
                             std::to_string(limits.max_headers) + " header lines");
    }
    if (line.front() == ' ' || line.front() == '\t')
      return refuse(400, "folded header lines (obsolete line folding) are not accepted");
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos)
      return refuse(400, "a header line has no colon: every header is NAME: VALUE");
    const std::string_view name = line.substr(0, colon);
    if (!is_token(name)) return refuse(400, "a header name is empty or not a token");
    for (unsigned char c : line.substr(colon + 1)) {
      if ((c < 0x20 && c != '\t') || c == 0x7f) {
        return refuse(400, "the value of header '" + std::string(name) +
                               "' holds a control character (NUL, CR or another below 0x20)");
      }
    }
    for (std::size_t i = 0; i < kSingletons.size(); ++i) {
      if (name.size() == std::string_view(kSingletons[i]).size() &&
          strncasecmp(name.data(), kSingletons[i], name.size()) == 0 && ++seen[i] > 1) {
        return refuse(400,
                      std::string("the request has more than one ") + kSingletons[i] + " header");
      }
    }
  }
}

}  // namespace nibble::http
