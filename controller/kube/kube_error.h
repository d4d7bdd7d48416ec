#pragma once
// The one error type of the Kubernetes client: the HTTP status (0 when no answer arrived), the
// Status object's reason (NotFound, Conflict, Expired, Gone, ...) and its message, so callers
// branch on what went wrong (retry a 409, re-list on 410) and users read the API server's words.
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace nibble::kube {

class KubeError : public std::runtime_error {
 public:
  KubeError(int status, std::string reason, const std::string& message);

  int status() const { return status_; }  // 0: transport failure (no HTTP answer)
  const std::string& reason() const { return reason_; }

  bool not_found() const { return status_ == 404; }
  bool conflict() const { return status_ == 409; }
  bool gone() const { return status_ == 410 || reason_ == "Expired" || reason_ == "Gone"; }
  // Worth trying again later: no answer, throttled, or a server-side failure.
  bool transient() const { return status_ == 0 || status_ == 429 || status_ >= 500; }

 private:
  int status_;
  std::string reason_;
};

// Builds the error from an API server answer; `body` is a metav1.Status when the server sent
// one, anything else otherwise (its start becomes the message).
KubeError error_from_response(int status, const std::string& method, const std::string& path,
                              const std::string& body);
// The same from a Status object met inside a watch stream (type ERROR).
KubeError error_from_status(const nlohmann::json& status);

}  // namespace nibble::kube
