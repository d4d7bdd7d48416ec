#pragma once
// Checks one HTTP/1.1 request head (request line and header lines, up to the blank line) against
// the HTTP layer's limits before cpp-httplib parses it. httplib 0.11 reads header lines for as
// long as they come (no cap on their number or total size), drops a line without a colon, cuts a
// value at a NUL byte and lets the first of two Authorization headers win; the scan refuses each
// of those instead. It works on the bytes received so far, so the server can stop reading the
// moment a limit is crossed, and a complete head that passes is handed to httplib unchanged.
#include <cstddef>
#include <string>
#include <string_view>

namespace nibble::http {

struct HeadLimits {
  std::size_t max_head_bytes = 32 * 1024;  // request line + headers + blank line: 431 above
  std::size_t max_line_bytes = 8 * 1024;   // one line (httplib's own limit): 414 or 431 above
  std::size_t max_headers = 100;           // header lines: 431 above
};

struct HeadScan {
  enum class State {
    kIncomplete,  // no blank line yet and no limit crossed: read more
    kComplete,    // a valid head of `head_bytes` bytes
    kRefused,     // answer `status` with `reason` and close the connection
  };
  State state = State::kIncomplete;
  std::size_t head_bytes = 0;
  int status = 0;
  std::string reason;
};

// Scans `received` (the start of a request; bytes past the head, a body or a pipelined request,
// are ignored). Rules: lines end in CRLF; the request line is METHOD SP target SP HTTP/1.x;
// header lines are `token ":" value` with no control character in the value but tab (obsolete
// line folding is refused); Authorization, Host, Content-Length and Transfer-Encoding appear at
// most once, and not Content-Length with Transfer-Encoding (both: request smuggling).
HeadScan scan_request_head(std::string_view received, const HeadLimits& limits);

}  // namespace nibble::http
