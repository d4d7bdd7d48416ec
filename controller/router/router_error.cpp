#include "controller/router/router_error.h"

#include "http/api_error.h"

namespace nibble::router {

void send_error(httplib::Response& res, int status, const std::string& type,
                const std::string& message, const std::string& code, const std::string& param) {
  http::send_error(res, http::ApiError(status, type, message, param, code));
}

void send_unavailable(httplib::Response& res, const std::string& message, int retry_after_s) {
  http::send_error(res,
                   http::ApiError(503, "service_unavailable", message, {}, "service_unavailable"),
                   retry_after_s);
}

}  // namespace nibble::router
