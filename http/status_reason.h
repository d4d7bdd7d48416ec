#pragma once
// HTTP statuses in the Kubernetes API's words (its metav1.StatusReason names): the controller's
// own API answers with them, and the Kubernetes client fills them in when a Status has none.
#include <string>

namespace nibble::http {

// "BadRequest", "NotFound", "Conflict", ...; "Unknown" for a status without a name.
std::string status_reason(int status);

}  // namespace nibble::http
