#include "controller/kube/kube_error.h"

#include "http/status_reason.h"

namespace nibble::kube {

KubeError::KubeError(int status, std::string reason, const std::string& message)
    : std::runtime_error(message), status_(status), reason_(std::move(reason)) {}

KubeError error_from_status(const nlohmann::json& status) {
  const int code = status.value("code", 0);
  std::string reason = status.value("reason", "");
  if (reason.empty()) reason = http::status_reason(code);
  std::string message = status.value("message", "");
  if (message.empty()) message = reason;
  return KubeError(code, reason, message);
}

KubeError error_from_response(int status, const std::string& method, const std::string& path,
                              const std::string& body) {
  const nlohmann::json parsed = nlohmann::json::parse(body, nullptr, false);
  std::string reason = http::status_reason(status);
  std::string message;
  if (parsed.is_object() && parsed.value("kind", "") == "Status") {
    reason = parsed.value("reason", reason);
    message = parsed.value("message", "");
  }
  if (message.empty()) message = body.substr(0, 200);
  return KubeError(status, reason,
                   method + " " + path + ": " + std::to_string(status) + " " + reason +
                       (message.empty() ? "" : ": " + message));
}

}  // namespace nibble::kube
