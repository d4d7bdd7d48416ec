#pragma once
// The server's one error type: what went wrong, in OpenAI's error shape and HTTP status.
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace nibble::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string param = {},
           std::string code = {})
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  nlohmann::json body() const;

 private:
  int status_;
  std::string type_;
  std::string param_;
  std::string code_;
};

// 400 invalid_request_error, naming the offending parameter.
ApiError invalid_request(const std::string& message, const std::string& param = {});
ApiError model_not_found(const std::string& model);
ApiError unauthorized();
ApiError service_unavailable(const std::string& message);
nlohmann::json error_body(int status, const std::string& type, const std::string& message);

}  // namespace nibble::server
