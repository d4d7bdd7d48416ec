#pragma once
// The accesses the install's RBAC grants nibble-controller (manifests/rbac/: the ClusterRole and
// the leader-election Role; charts/nibble renders the same rules from links to these files), as
// FakeApiServer::Access triples, so the API-server double can authorize the backend's requests
// exactly as a cluster with that install would.
#include <yaml-cpp/yaml.h>

#include <set>
#include <stdexcept>
#include <string>

#include "tests/controller/kube/fake_api_server.h"

namespace nibble::kube::testing {

inline std::set<FakeApiServer::Access> install_rbac_grants() {
  std::set<FakeApiServer::Access> grants;
  for (const char* file : {"cluster_role.yaml", "leader_election_role.yaml"}) {
    const YAML::Node role =
        YAML::LoadFile(std::string(NIBBLE_SOURCE_DIR) + "/manifests/rbac/" + file);
    for (const YAML::Node& rule : role["rules"]) {
      for (const YAML::Node& group : rule["apiGroups"]) {
        for (const YAML::Node& resource : rule["resources"]) {
          for (const YAML::Node& verb : rule["verbs"]) {
            // A wildcard would grant more than the controller calls: least privilege forbids it.
            if (group.as<std::string>() == "*" || resource.as<std::string>() == "*" ||
                verb.as<std::string>() == "*")
              throw std::runtime_error(std::string(file) + ": wildcard in an RBAC rule");
            grants.insert(
                {group.as<std::string>(), resource.as<std::string>(), verb.as<std::string>()});
          }
        }
      }
    }
  }
  return grants;
}

// Authorizes the requests of clients whose User-Agent starts with controller_agent_prefix with
// the install's RBAC (a test's own clients, acting as users, are let through).
inline void enforce_install_rbac(FakeApiServer& server,
                                 const std::string& controller_agent_prefix) {
  server.set_authorizer([grants = install_rbac_grants(), controller_agent_prefix](
                            const FakeApiServer::Access& a, const std::string& agent) {
    return !agent.starts_with(controller_agent_prefix) || grants.contains(a);
  });
}

}  // namespace nibble::kube::testing
