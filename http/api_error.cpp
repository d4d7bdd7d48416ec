#include "http/api_error.h"

namespace nibble::http {

nlohmann::json error_body(int status, const std::string& type, const std::string& message) {
  return ApiError(status, type, message).body();
}

nlohmann::json ApiError::body() const {
  nlohmann::json error = {{"message", what()}, {"type", type_}};
  error["param"] = param_.empty() ? nlohmann::json(nullptr) : nlohmann::json(param_);
  error["code"] = code_.empty() ? nlohmann::json(status_) : nlohmann::json(code_);
  return {{"error", error}};
}

ApiError invalid_request(const std::string& message, const std::string& param) {
  return ApiError(400, "invalid_request_error", message, param);
}

ApiError model_not_found(const std::string& model) {
  return ApiError(404, "invalid_request_error", "The model '" + model + "' does not exist.",
                  "model", "model_not_found");
}

ApiError unauthorized() {
  return ApiError(401, "authentication_error",
                  "Missing or invalid API key: send 'Authorization: Bearer <key>'.", {},
                  "invalid_api_key");
}

ApiError service_unavailable(const std::string& message) {
  return ApiError(503, "service_unavailable", message);
}

void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

void send_error(httplib::Response& res, const ApiError& error, int retry_after_s) {
  if (error.status() == 503) res.set_header("Retry-After", std::to_string(retry_after_s));
  send_json(res, error.status(), error.body());
}

}  // namespace nibble::http
