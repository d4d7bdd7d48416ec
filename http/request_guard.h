#pragma once
// Checks that keep a browser from driving an API it happens to reach (cross-site requests,
// DNS rebinding) before any handler runs:
//   - bound to loopback, a request whose Host is anything but exactly a loopback name or address
//     (localhost, a dotted-quad 127.0.0.0/8 address, [::1], each with an optional :port) or the
//     listen address is refused (403): a rebound name resolves to 127.0.0.1 but keeps its own
//     Host, and "127.evil.example" is a name, not an address;
//   - a write (POST, PUT, PATCH, DELETE) carrying an Origin other than this server's own
//     (http:// + the request's Host) or one of allowed_origins is refused (403); no Origin
//     (curl, SDKs) is fine;
//   - a write with a body must declare one of the accepted media types (415), so a page cannot
//     post a "simple" text/plain or form request without a CORS preflight.
#include <optional>
#include <string>
#include <vector>

#include "http/api_error.h"

namespace nibble::http {

struct RequestGuardConfig {
  std::string listen_host;  // as configured: "127.0.0.1", "0.0.0.0", "::1", a name...
  // Media types a write's body may have; "application/json" also admits "+json" types.
  std::vector<std::string> write_content_types = {"application/json"};
  std::vector<std::string> allowed_origins;  // cors.h; empty: only same-origin writes
};

struct GuardedRequest {
  std::string method;
  std::string host;          // the Host header ("" when absent)
  std::string origin;        // the Origin header ("" when absent)
  std::string content_type;  // the Content-Type header ("" when absent)
  bool has_body = false;
};

// The refusal, or nullopt when the request may proceed.
std::optional<ApiError> check_request(const RequestGuardConfig& config, const GuardedRequest& r);

// True for exactly "localhost", a dotted-quad 127.0.0.0/8 address and "::1" ("[::1]"), each with
// an optional numeric port.
bool is_loopback_host(const std::string& host);
// "host:port", "[::1]:port" or "host" → the host part, lower-cased, without brackets.
std::string host_without_port(const std::string& host_header);

}  // namespace nibble::http
