#include "controller/source/hub_http.h"

#include <httplib.h>

#include <cctype>

#include "controller/source/model_downloader.h"

namespace nibble::source {

namespace {

bool is_redirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

bool equals_ignoring_case(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

HttpUrl parse_http_url(const std::string& url) {
  const size_t scheme_end = url.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") {
    throw SourceError("URL '" + url + "': expected http:// or https://");
  }
  const size_t host_begin = scheme_end + 3;
  const size_t target_begin = url.find('/', host_begin);
  HttpUrl parsed;
  parsed.origin = url.substr(0, target_begin);
  parsed.target = target_begin == std::string::npos ? "/" : url.substr(target_begin);
  if (parsed.origin.size() == host_begin) throw SourceError("URL '" + url + "': no host");
  return parsed;
}

std::string header_value(const HttpFetch& fetch, const std::string& name) {
  for (const auto& [key, value] : fetch.headers) {
    if (equals_ignoring_case(key, name)) return value;
  }
  return "";
}

HttpFetch http_get(const HttpRequest& request,
                   const std::function<bool(const HttpFetch&)>& on_response,
                   const std::function<bool(const char*, size_t)>& on_body) {
  HttpFetch fetch;
  fetch.url = request.url;
  for (int hop = 0; hop <= request.max_redirects; ++hop) {
    const HttpUrl url = parse_http_url(fetch.url);
    httplib::Client client(url.origin);
    client.set_connection_timeout(request.timeout_seconds, 0);
    client.set_read_timeout(request.timeout_seconds, 0);
    client.set_follow_location(false);
    httplib::Headers headers;
    if (!request.bearer_token.empty() && url.origin == request.token_origin) {
      headers.emplace("Authorization", "Bearer " + request.bearer_token);
    }
    if (!request.range.empty()) headers.emplace("Range", request.range);

    fetch.status = 0;
    fetch.headers.clear();
    bool wants_body = false;
    httplib::Result result = client.Get(
        url.target, headers,
        [&](const httplib::Response& response) {
          fetch.status = response.status;
          fetch.headers.insert(response.headers.begin(), response.headers.end());
          wants_body = !is_redirect(response.status) && on_response(fetch);
          return wants_body;
        },
        [&](const char* data, size_t size) { return on_body(data, size); });

    if (is_redirect(fetch.status)) {
      const std::string location = header_value(fetch, "Location");
      if (location.empty()) {
        fetch.transport_error = "redirect " + std::to_string(fetch.status) + " without Location";
        return fetch;
      }
      fetch.url = location.front() == '/' ? url.origin + location : location;
      continue;
    }
    // A handler that declined the body also cancels the request; that is not a failure.
    if (!result && !(fetch.status != 0 && !wants_body)) {
      fetch.transport_error = httplib::to_string(result.error());
    }
    return fetch;
  }
  fetch.transport_error = "more than " + std::to_string(request.max_redirects) + " redirects";
  return fetch;
}

}  // namespace nibble::source
