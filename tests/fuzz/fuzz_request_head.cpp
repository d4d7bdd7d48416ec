// libFuzzer: the HTTP layer's request-head scanner (http/request_head.h), which every byte a
// client sends to the engine, the router or the controller API passes before cpp-httplib sees
// it. The input is the received bytes. Beyond "no crash", the scanner's contract: a complete
// head ends in its blank line within the limits, a refusal is one of the statuses the server
// sends (400, 414, 431), and a head judged complete is judged the same from any longer stream
// (the server scans as bytes arrive, so a verdict must not depend on where a read stopped).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "http/request_head.h"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using nibble::http::HeadLimits;
  using nibble::http::HeadScan;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  HeadLimits small;  // limits the fuzzer can reach within -max_len
  small.max_head_bytes = 512;
  small.max_line_bytes = 128;
  small.max_headers = 8;
  for (const HeadLimits& limits : {HeadLimits{}, small}) {
    const HeadScan scan = nibble::http::scan_request_head(bytes, limits);
    switch (scan.state) {
      case HeadScan::State::kComplete: {
        require(scan.head_bytes >= 4 && scan.head_bytes <= bytes.size());
        require(scan.head_bytes <= limits.max_head_bytes);
        require(bytes.substr(scan.head_bytes - 4, 4) == "\r\n\r\n");
        // Every prefix that holds the whole head reads the same; shorter ones need more bytes
        // or were already refused, never complete with another length.
        const HeadScan whole =
            nibble::http::scan_request_head(bytes.substr(0, scan.head_bytes), limits);
        require(whole.state == HeadScan::State::kComplete && whole.head_bytes == scan.head_bytes);
        const HeadScan shorter =
            nibble::http::scan_request_head(bytes.substr(0, scan.head_bytes - 1), limits);
        require(shorter.state != HeadScan::State::kComplete);
        break;
      }
      case HeadScan::State::kRefused:
        require(scan.status == 400 || scan.status == 414 || scan.status == 431);
        require(!scan.reason.empty());
        break;
      case HeadScan::State::kIncomplete:
        require(bytes.size() <= limits.max_head_bytes);
        break;
    }
  }
  return 0;
}
