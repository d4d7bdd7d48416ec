// scan_request_head: incomplete, complete and refused heads, and where each limit bites.
#include <gtest/gtest.h>

#include "http/request_head.h"

namespace nibble::http {
namespace {

using State = HeadScan::State;

TEST(RequestHead, CompleteHeadsEndAtTheBlankLineAndIgnoreWhatFollows) {
  const std::string head = "POST /v1/x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n";
  EXPECT_EQ(scan_request_head(head.substr(0, 20), {}).state, State::kIncomplete);
  EXPECT_EQ(scan_request_head(head.substr(0, head.size() - 1), {}).state, State::kIncomplete);
  const HeadScan whole = scan_request_head(head + "{}GET / HTTP/1.1\r\n", {});
  EXPECT_EQ(whole.state, State::kComplete);
  EXPECT_EQ(whole.head_bytes, head.size());
}

TEST(RequestHead, LimitsBiteAsSoonAsTheyAreCrossed) {
  const HeadLimits limits{.max_head_bytes = 100, .max_line_bytes = 40, .max_headers = 2};
  // A header line longer than the line limit, still incomplete: refused without its end.
  const HeadScan line = scan_request_head("GET / HTTP/1.1\r\nX: " + std::string(50, 'a'), limits);
  EXPECT_EQ(line.state, State::kRefused);
  EXPECT_EQ(line.status, 431);
  EXPECT_EQ(scan_request_head("GET /" + std::string(50, 'a'), limits).status, 414);
  EXPECT_EQ(scan_request_head("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", limits).status,
            431);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 4; ++i) many += "X: " + std::string(20, 'a') + "\r\n";
  EXPECT_EQ(
      scan_request_head(many, {.max_head_bytes = 100, .max_line_bytes = 40, .max_headers = 100})
          .status,
      431);
}

TEST(RequestHead, MalformedAndAmbiguousHeadsAre400) {
  for (const char* bad : {
           "GET / HTTP/1.1\nHost: a\r\n\r\n",            // bare LF
           "GET /  HTTP/1.1\r\n\r\n",                    // two spaces
           "GET / HTTP/2.0\r\n\r\n",                     // not 1.x
           "G(T / HTTP/1.1\r\n\r\n",                     // method not a token
           "GET / HTTP/1.1\r\nNoColon\r\n\r\n",          // no colon
           "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",      // name not a token
           "GET / HTTP/1.1\r\nA: x\r\n folded\r\n\r\n",  // obsolete folding
           "GET / HTTP/1.1\r\nA: x\x01y\r\n\r\n",        // control character
           "GET / HTTP/1.1\r\nauthorization: a\r\nAuthorization: b\r\n\r\n",
           "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
           "POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
       }) {
    const HeadScan scan = scan_request_head(bad, {});
    EXPECT_EQ(scan.state, State::kRefused) << bad;
    EXPECT_EQ(scan.status, 400) << bad;
  }
  EXPECT_EQ(scan_request_head("GET / HTTP/1.1\r\nA: tab\there\r\n\r\n", {}).state,
            State::kComplete);
}

}  // namespace
}  // namespace nibble::http
