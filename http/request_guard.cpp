#include "http/request_guard.h"

#include <algorithm>
#include <cctype>

namespace nibble::http {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

bool is_write(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
}

// "application/json; charset=utf-8" → "application/json"
std::string media_type(const std::string& content_type) {
  std::string t = lower(content_type.substr(0, content_type.find(';')));
  const auto first = t.find_first_not_of(" \t");
  const auto last = t.find_last_not_of(" \t");
  return first == std::string::npos ? std::string() : t.substr(first, last - first + 1);
}

bool accepted_media_type(const std::vector<std::string>& accepted, const std::string& type) {
  for (const std::string& a : accepted) {
    if (type == a) return true;
    if (a == "application/json" && type.starts_with("application/") && type.ends_with("+json"))
      return true;
  }
  return false;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

std::string host_without_port(const std::string& host_header) {
  std::string h = lower(host_header);
  if (h.starts_with("[")) {
    const auto close = h.find(']');
    return close == std::string::npos ? h : h.substr(1, close - 1);
  }
  // One colon: host:port. More: a bare IPv6 address (not valid in Host, but harmless).
  const auto colon = h.find(':');
  if (colon != std::string::npos && h.find(':', colon + 1) == std::string::npos) h.resize(colon);
  return h;
}

bool is_loopback_host(const std::string& host) {
  const std::string h = host_without_port(host);
  return h == "localhost" || h.ends_with(".localhost") || h == "::1" || h.starts_with("127.");
}

std::optional<ApiError> check_request(const RequestGuardConfig& config, const GuardedRequest& r) {
  if (is_loopback_host(config.listen_host) && !r.host.empty() && !is_loopback_host(r.host) &&
      host_without_port(r.host) != host_without_port(config.listen_host)) {
    return ApiError(403, "forbidden",
                    "Host '" + r.host +
                        "' is not this server's address; it listens on loopback only "
                        "(a foreign Host is how DNS rebinding reaches local services)");
  }
  if (!is_write(r.method)) return std::nullopt;
  if (!r.origin.empty() && lower(r.origin) != "http://" + lower(r.host)) {
    return ApiError(403, "forbidden",
                    "cross-origin write refused: Origin '" + r.origin +
                        "' is not this server (http://" + r.host + ")");
  }
  if (r.has_body && !config.write_content_types.empty() &&
      !accepted_media_type(config.write_content_types, media_type(r.content_type))) {
    return ApiError(415, "unsupported_media_type",
                    "Content-Type '" + r.content_type + "' is not accepted here; send " +
                        join(config.write_content_types));
  }
  return std::nullopt;
}

}  // namespace nibble::http
