// The browser guards: foreign Host on loopback (DNS rebinding), foreign Origin on writes,
// writes without an accepted Content-Type.
#include <gtest/gtest.h>

#include "http/request_guard.h"

namespace nibble::http {
namespace {

int status_of(const RequestGuardConfig& config, const GuardedRequest& r) {
  const auto refusal = check_request(config, r);
  return refusal ? refusal->status() : 0;
}

TEST(RequestGuard, LoopbackServersRefuseForeignHostNames) {
  const RequestGuardConfig loopback{"127.0.0.1", {"application/json"}};
  EXPECT_EQ(status_of(loopback, {"GET", "127.0.0.1:8001", "", "", false}), 0);
  EXPECT_EQ(status_of(loopback, {"GET", "localhost:8001", "", "", false}), 0);
  EXPECT_EQ(status_of(loopback, {"GET", "[::1]:8001", "", "", false}), 0);
  EXPECT_EQ(status_of(loopback, {"GET", "", "", "", false}), 0);  // HTTP/1.0
  EXPECT_EQ(status_of(loopback, {"GET", "evil.example:8001", "", "", false}), 403);
  EXPECT_EQ(status_of(loopback, {"POST", "EVIL.example", "", "application/json", true}), 403);
  // Bound beyond loopback, any name may reach it (API keys protect it there).
  const RequestGuardConfig anywhere{"0.0.0.0", {"application/json"}};
  EXPECT_EQ(status_of(anywhere, {"GET", "nibble.internal:8000", "", "", false}), 0);
  const RequestGuardConfig named{"localhost", {"application/json"}};
  EXPECT_EQ(status_of(named, {"GET", "evil.example", "", "", false}), 403);
}

TEST(RequestGuard, LoopbackMeansExactlyLoopbackNamesAndAddresses) {
  for (const char* host : {"localhost", "LOCALHOST:8000", "127.0.0.1", "127.255.3.4:1", "[::1]",
                           "[::1]:8000", "::1"}) {
    EXPECT_TRUE(is_loopback_host(host)) << host;
  }
  for (const char* host : {"127.evil.example", "127.0.0.1.evil.example", "127.0.0.1:80x", "127.0.0",
                           "127.0.0.256", "127.0.0.1.", "localhost.evil.example", "evil.localhost",
                           "[::1].evil", "[::1]:x", "0127.0.0.1", ""}) {
    EXPECT_FALSE(is_loopback_host(host)) << host;
  }
}

TEST(RequestGuard, WritesFromAnotherOriginAreRefused) {
  const RequestGuardConfig c{"127.0.0.1", {"application/json"}};
  EXPECT_EQ(
      status_of(c, {"POST", "127.0.0.1:8001", "http://evil.example", "application/json", true}),
      403);
  EXPECT_EQ(status_of(c, {"DELETE", "127.0.0.1:8001", "null", "", false}), 403);
  EXPECT_EQ(
      status_of(c, {"POST", "127.0.0.1:8001", "http://127.0.0.1:8001", "application/json", true}),
      0);
  EXPECT_EQ(
      status_of(c, {"POST", "127.0.0.1:8001", "http://127.0.0.1:9999", "application/json", true}),
      403);
  // Reads with an Origin are the browser's CORS business: it hides the answer.
  EXPECT_EQ(status_of(c, {"GET", "127.0.0.1:8001", "http://evil.example", "", false}), 0);
}

TEST(RequestGuard, WritesNeedAnAcceptedContentType) {
  const RequestGuardConfig json{"127.0.0.1", {"application/json"}};
  EXPECT_EQ(status_of(json, {"POST", "localhost", "", "application/json", true}), 0);
  EXPECT_EQ(status_of(json, {"POST", "localhost", "", "Application/JSON; charset=utf-8", true}), 0);
  EXPECT_EQ(status_of(json, {"POST", "localhost", "", "application/merge-patch+json", true}), 0);
  EXPECT_EQ(status_of(json, {"POST", "localhost", "", "text/plain", true}), 415);
  EXPECT_EQ(status_of(json, {"POST", "localhost", "", "application/x-www-form-urlencoded", true}),
            415);
  EXPECT_EQ(status_of(json, {"POST", "localhost", "", "", true}), 415);
  EXPECT_EQ(status_of(json, {"DELETE", "localhost", "", "", false}), 0);  // no body
  const RequestGuardConfig yaml{"127.0.0.1", {"application/json", "application/yaml"}};
  EXPECT_EQ(status_of(yaml, {"PUT", "localhost", "", "application/yaml", true}), 0);
  EXPECT_EQ(status_of(yaml, {"PUT", "localhost", "", "text/plain", true}), 415);
  const auto refusal = check_request(json, {"POST", "localhost", "", "text/plain", true});
  ASSERT_TRUE(refusal);
  EXPECT_NE(std::string(refusal->what()).find("application/json"), std::string::npos);
}

}  // namespace
}  // namespace nibble::http
