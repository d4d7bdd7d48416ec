#pragma once
// The one error type of every HTTP API in Nibble (engine, router, controller API): what went
// wrong, in OpenAI's error shape and HTTP status. `code` is the given code, else the status:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
#include <httplib.h>

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace nibble::http {

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

// Writes status and JSON body (invalid UTF-8 replaced, never thrown); a 503 gets Retry-After.
void send_json(httplib::Response& res, int status, const nlohmann::json& body);
void send_error(httplib::Response& res, const ApiError& error, int retry_after_s = 1);

}  // namespace nibble::http
