#pragma once
// GET /metrics for any server of the HTTP layer: the registry in Prometheus' text format.
// Whether it needs the API key is the server's auth rule (ServerConfig::open_paths).
#include <httplib.h>

#include "metrics/exposition.h"
#include "metrics/registry.h"

namespace nibble::http {

inline void serve_metrics(httplib::Server& server, const metrics::Registry& registry,
                          const std::string& path = "/metrics") {
  server.Get(path, [&registry](const httplib::Request&, httplib::Response& response) {
    response.set_content(registry.render(), metrics::kExpositionContentType);
  });
}

}  // namespace nibble::http
