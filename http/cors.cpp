#include "http/cors.h"

#include <strings.h>

namespace nibble::http {
namespace {

// A preflight answer is cached by the browser this long.
constexpr const char* kPreflightMaxAgeS = "600";

std::string trimmed(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return {};
  const auto last = s.find_last_not_of(" \t");
  std::string out = s.substr(first, last - first + 1);
  while (!out.empty() && out.back() == '/') out.pop_back();  // "http://x/" is "http://x"
  return out;
}

}  // namespace

bool is_origin_allowed(const std::vector<std::string>& allowed, const std::string& origin) {
  if (origin.empty() || origin == "null") return false;
  for (const std::string& a : allowed) {
    if (a == "*") return true;
    if (a.size() == origin.size() && strcasecmp(a.c_str(), origin.c_str()) == 0) return true;
  }
  return false;
}

std::vector<std::string> parse_origin_list(const std::string& comma_list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= comma_list.size()) {
    const std::size_t comma = std::min(comma_list.find(',', start), comma_list.size());
    std::string item = trimmed(comma_list.substr(start, comma - start));
    if (!item.empty()) out.push_back(std::move(item));
    start = comma + 1;
  }
  return out;
}

void add_cors_headers(httplib::Response& res, const std::string& origin) {
  res.set_header("Access-Control-Allow-Origin", origin);
  res.set_header("Vary", "Origin");
}

void answer_preflight(httplib::Response& res, const std::string& requested_headers) {
  res.status = 204;
  res.set_header("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE, OPTIONS");
  res.set_header("Access-Control-Allow-Headers",
                 requested_headers.empty() ? "Authorization, Content-Type" : requested_headers);
  res.set_header("Access-Control-Max-Age", kPreflightMaxAgeS);
}

}  // namespace nibble::http
