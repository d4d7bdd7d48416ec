// controller/source/hub_http.h: one streamed HTTP(S) GET with redirects followed by hand, so
// that the Authorization header goes to the endpoint's own origin only and never to the CDN
// host a resolve URL redirects to. Transport failures are reported, not thrown.
#pragma once

#include <functional>
#include <map>
#include <string>

namespace nibble::source {

struct HttpUrl {
  std::string origin;  // scheme://host[:port]
  std::string target;  // /path?query
};

// Throws SourceError for anything but http(s)://host[:port][/target].
HttpUrl parse_http_url(const std::string& url);

struct HttpFetch {
  std::string url;  // the final URL after redirects
  int status = 0;   // 0 when no response arrived
  std::multimap<std::string, std::string> headers;
  std::string transport_error;  // non-empty when the connection failed or dropped
};

struct HttpRequest {
  std::string url;
  std::string bearer_token;  // sent only while the URL's origin is token_origin
  std::string token_origin;
  std::string range;  // e.g. "bytes=100-", empty for none
  int timeout_seconds = 60;
  int max_redirects = 10;
};

// on_response sees the final (non-redirect) status and headers before the body and returns
// false to skip the body; on_body gets its chunks and returns false to stop.
HttpFetch http_get(const HttpRequest& request,
                   const std::function<bool(const HttpFetch&)>& on_response,
                   const std::function<bool(const char*, size_t)>& on_body);

std::string header_value(const HttpFetch& fetch, const std::string& name);

}  // namespace nibble::source
