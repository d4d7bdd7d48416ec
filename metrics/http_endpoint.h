#pragma once
// Serving a registry over HTTP takes one call: serve_metrics(server, registry).
// Header-only so that metrics/ itself does not depend on an HTTP library.
#include <httplib.h>

#include "metrics/exposition.h"
#include "metrics/registry.h"

namespace nibble::metrics {

inline void serve_metrics(httplib::Server& server, const Registry& registry,
                          const std::string& path = "/metrics") {
  server.Get(path, [&registry](const httplib::Request&, httplib::Response& response) {
    response.set_content(registry.render(), kExpositionContentType);
  });
}

}  // namespace nibble::metrics
