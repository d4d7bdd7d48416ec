#pragma once
// The install's ModelRecipe CRD (manifests/crds/), read so that the API-server double serves the
// scale subresource exactly where the CRD puts it (subresources.scale's paths).
#include <yaml-cpp/yaml.h>

#include <string>

#include "tests/controller/kube/fake_api_server.h"

namespace nibble::kube::testing {

// ".spec.replicas.desired" → "/spec/replicas/desired"
inline std::string json_pointer_of(const std::string& path) {
  std::string out = path;
  for (char& c : out)
    if (c == '.') c = '/';
  return out;
}

inline void serve_install_crd_scale(FakeApiServer& server) {
  const YAML::Node crd = YAML::LoadFile(std::string(NIBBLE_SOURCE_DIR) +
                                        "/manifests/crds/nibble.dev_modelrecipes.yaml");
  const YAML::Node scale = crd["spec"]["versions"][0]["subresources"]["scale"];
  server.set_scale_paths("/apis/nibble.dev/v1alpha1/modelrecipes",
                         {json_pointer_of(scale["specReplicasPath"].as<std::string>()),
                          json_pointer_of(scale["statusReplicasPath"].as<std::string>()),
                          json_pointer_of(scale["labelSelectorPath"].as<std::string>())});
}

}  // namespace nibble::kube::testing
