#pragma once
// The API-server double as the install leaves it, for the tests that run a controller against
// it: the controller's RBAC (service account "ctl") enforced and the CRD served with its scale
// subresource; then started.
#include "tests/controller/kube/fake_api_server.h"
#include "tests/controller/kube/install_crd.h"
#include "tests/controller/kube/install_rbac.h"

namespace nibble::kube::testing {

inline void start_as_installed(FakeApiServer& server) {
  enforce_install_rbac(server, "ctl");
  serve_install_crd_scale(server);
  server.start();
}

}  // namespace nibble::kube::testing
