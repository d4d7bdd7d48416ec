#pragma once
// API paths of the resources the controller uses: /api/v1/... for the core group,
// /apis/<group>/<version>/... otherwise, with the namespace and subresource (status, scale)
// where given. Names and namespaces are DNS-1123 strings and need no escaping.
#include <string>

namespace nibble::kube {

struct ResourceType {
  std::string group;    // "" for the core group
  std::string version;  // v1, v1alpha1
  std::string plural;   // deployments, modelrecipes
  std::string kind;     // Deployment, ModelRecipe
  bool namespaced = true;

  std::string api_version() const { return group.empty() ? version : group + "/" + version; }
};

// The types the controller reads and writes.
inline const ResourceType kModelRecipes{"nibble.dev", "v1alpha1", "modelrecipes", "ModelRecipe"};
inline const ResourceType kDeployments{"apps", "v1", "deployments", "Deployment"};
inline const ResourceType kServices{"", "v1", "services", "Service"};
inline const ResourceType kPods{"", "v1", "pods", "Pod"};
inline const ResourceType kPodDisruptionBudgets{"policy", "v1", "poddisruptionbudgets",
                                                "PodDisruptionBudget"};
inline const ResourceType kPodMonitors{"monitoring.coreos.com", "v1", "podmonitors", "PodMonitor"};
inline const ResourceType kLeases{"coordination.k8s.io", "v1", "leases", "Lease"};
inline const ResourceType kEvents{"", "v1", "events", "Event"};
inline const ResourceType kSecrets{"", "v1", "secrets", "Secret"};

// The collection (`ns` empty: across all namespaces).
std::string collection_path(const ResourceType& type, const std::string& ns);
std::string object_path(const ResourceType& type, const std::string& ns, const std::string& name,
                        const std::string& subresource = "");
// "ns/name", the key of caches and the work queue.
std::string object_key(const std::string& ns, const std::string& name);
// Splits a key back; a key without '/' is a cluster-scoped name.
std::pair<std::string, std::string> split_key(const std::string& key);

// Percent-encodes a query parameter value (label selectors carry '=' and ',').
std::string query_escape(const std::string& value);

}  // namespace nibble::kube
