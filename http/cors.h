#pragma once
// CORS for the origins an operator allows explicitly (--allowed-origins, vLLM's flag): a page
// served from one of them may call the API from the browser. Nothing is allowed by default, so
// without the flag browsers keep getting 403 for cross-origin writes (request_guard.h).
//   - a request whose Origin is allowed gets Access-Control-Allow-Origin: <that origin> and
//     Vary: Origin (never "*" with a key-protected API: the answer names the one origin);
//   - a preflight (OPTIONS with Access-Control-Request-Method) from an allowed origin is
//     answered 204 before the key check (browsers send preflights without credentials), naming
//     the methods and the headers the page asked for; one from any other origin falls through
//     to the routes and gets no CORS headers, so the browser refuses the real request.
#include <httplib.h>

#include <string>
#include <vector>

namespace nibble::http {

// Origins are compared as "scheme://host[:port]", case-insensitively; "*" allows every origin.
bool is_origin_allowed(const std::vector<std::string>& allowed, const std::string& origin);
// "a, b,c" → {"a", "b", "c"} (empty entries dropped); how --allowed-origins is given.
std::vector<std::string> parse_origin_list(const std::string& comma_list);

void add_cors_headers(httplib::Response& res, const std::string& origin);
void answer_preflight(httplib::Response& res, const std::string& requested_headers);

}  // namespace nibble::http
