#include "controller/router/router_error.h"

#include <nlohmann/json.hpp>

namespace nibble::router {

void send_error(httplib::Response& res, int status, const std::string& type,
                const std::string& message, const std::string& code, const std::string& param) {
  // OpenAI sends null, not "", for a missing param or code.
  auto or_null = [](const std::string& s) {
    return s.empty() ? nlohmann::json() : nlohmann::json(s);
  };
  const nlohmann::json body = {
      {"error",
       {{"message", message}, {"type", type}, {"param", or_null(param)}, {"code", or_null(code)}}}};
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void send_unavailable(httplib::Response& res, const std::string& message, int retry_after_s) {
  send_error(res, 503, "service_unavailable", message, "service_unavailable");
  res.set_header("Retry-After", std::to_string(retry_after_s));
}

}  // namespace nibble::router
