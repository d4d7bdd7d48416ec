#include "http/request_guard.h"

#include <algorithm>
#include <cctype>

#include "http/cors.h"

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

bool is_port(const std::string& s) {
  return !s.empty() && s.size() <= 5 && s.find_first_not_of("0123456789") == std::string::npos;
}

// "127.a.b.c" with four decimal octets of at most three digits, each 0-255.
bool is_loopback_ipv4(const std::string& s) {
  int octets = 0;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const std::size_t dot = std::min(s.find('.', pos), s.size());
    const std::string part = s.substr(pos, dot - pos);
    if (part.empty() || part.size() > 3 ||
        part.find_first_not_of("0123456789") != std::string::npos || std::stoi(part) > 255)
      return false;
    if (octets == 0 && part != "127") return false;
    ++octets;
    pos = dot + 1;
  }
  return octets == 4;
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
  std::string h = lower(host);
  // Split off ":port" (digits only) after a bracketed IPv6 address or a name/IPv4 address.
  if (h.starts_with("[")) {
    const auto close = h.find(']');
    if (close == std::string::npos) return false;
    const std::string rest = h.substr(close + 1);
    if (!rest.empty() && (rest[0] != ':' || !is_port(rest.substr(1)))) return false;
    return h.substr(1, close - 1) == "::1";
  }
  if (h == "::1") return true;  // a bare address (a listen host, not a Host header)
  const auto colon = h.find(':');
  if (colon != std::string::npos) {
    if (!is_port(h.substr(colon + 1))) return false;
    h.resize(colon);
  }
  return h == "localhost" || is_loopback_ipv4(h);
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
  if (!r.origin.empty() && lower(r.origin) != "http://" + lower(r.host) &&
      !is_origin_allowed(config.allowed_origins, r.origin)) {
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
