#pragma once
// The accesses the install's RBAC grants nibble-controller (manifests/rbac/: the controller's Role, the
// leader-election Role and the engine key seed Role; charts/nibble renders the same rules from
// links to these files), as FakeApiServer::Access (one per resourceName where a rule names some),
// so the API-server double can authorize the backend's requests exactly as a cluster with that
// install would.
#include <yaml-cpp/yaml.h>

#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/controller/kube/fake_api_server.h"

namespace nibble::kube::testing {

inline std::set<FakeApiServer::Access> install_rbac_grants() {
  std::set<FakeApiServer::Access> grants;
  for (const char* file :
       {"role.yaml", "leader_election_role.yaml", "engine_key_seed_role.yaml"}) {
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
            // resourceNames narrow a rule to those objects (never a create or a list).
            std::vector<std::string> names = {""};
            if (rule["resourceNames"]) names = rule["resourceNames"].as<std::vector<std::string>>();
            for (const std::string& name : names)
              grants.insert({group.as<std::string>(), resource.as<std::string>(),
                             verb.as<std::string>(), name});
          }
        }
      }
    }
  }
  return grants;
}

// The grant that allows an access: the rule naming its object, else the rule for any object;
// nullopt when none does.
inline std::optional<FakeApiServer::Access> granting_rule(
    const FakeApiServer::Access& a, const std::set<FakeApiServer::Access>& grants) {
  if (!a.name.empty() && grants.contains(a)) return a;
  FakeApiServer::Access any = a;
  any.name.clear();
  if (grants.contains(any)) return any;
  return std::nullopt;
}

// The rules the accesses used (each access as its granting rule; refused ones as asked).
inline std::set<FakeApiServer::Access> rules_used(const std::set<FakeApiServer::Access>& accesses,
                                                  const std::set<FakeApiServer::Access>& grants) {
  std::set<FakeApiServer::Access> out;
  for (const FakeApiServer::Access& a : accesses) out.insert(granting_rule(a, grants).value_or(a));
  return out;
}

// Authorizes the requests of clients whose User-Agent starts with controller_agent_prefix with
// the install's RBAC (a test's own clients, acting as users, are let through).
inline void enforce_install_rbac(FakeApiServer& server,
                                 const std::string& controller_agent_prefix) {
  server.set_authorizer([grants = install_rbac_grants(), controller_agent_prefix](
                            const FakeApiServer::Access& a, const std::string& agent) {
    return !agent.starts_with(controller_agent_prefix) || granting_rule(a, grants).has_value();
  });
}

}  // namespace nibble::kube::testing
