#pragma once
// Router errors in OpenAI's error shape, so clients see the same thing whether the router or
// an engine answered: {"error": {"message", "type", "param", "code"}}, `code` being the given
// code or else the status (http/api_error.h, the engine's rule).
#include <httplib.h>

#include <string>

namespace nibble::router {

// Sets status, body and content type on res.
void send_error(httplib::Response& res, int status, const std::string& type,
                const std::string& message, const std::string& code = {},
                const std::string& param = {});

// 503 with Retry-After (seconds), for a recipe with no replica that can answer now.
void send_unavailable(httplib::Response& res, const std::string& message, int retry_after_s);

}  // namespace nibble::router
