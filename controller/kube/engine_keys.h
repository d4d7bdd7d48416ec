#pragma once
// The engines' API keys on Kubernetes, one per recipe, with the least the controller may read.
// Every key is derived: HMAC-SHA256 under one random seed of "namespace/recipe", hex-encoded
// (64 characters). The seed lives in one Secret of the controller's own namespace
// (kSeedSecret, created by the first controller that finds it missing); it is the only Secret
// the controller reads, so its RBAC can name it (`get` with resourceNames) instead of reading
// every Secret, and every controller replica, leader or not, computes the same keys for its
// router without reading the per-recipe Secrets. Those are only created (the one Secret verb
// RBAC cannot narrow by name, and one that never returns another Secret's data).
// A recipe deleted and created again gets the same key, so a Secret left by the old one until
// garbage collection removes it holds the right key too. Keys are never logged.
#include <mutex>
#include <string>

#include "controller/kube/kube_client.h"

namespace nibble::kube {

inline constexpr const char* kSeedSecret = "nibble-engine-key-seed";
inline constexpr const char* kSeedKey = "seed";  // the key in the Secret's data

// HMAC-SHA256(seed, "nibble-engine-key/v1\n" + ns + "/" + recipe) as 64 hex characters.
std::string derive_engine_key(const std::string& seed, const std::string& ns,
                              const std::string& recipe);

class EngineKeys {
 public:
  // `namespace_name`: where the seed Secret lives (the controller's own namespace).
  EngineKeys(const KubeClient& client, std::string namespace_name);
  // The recipe's key. Reads (or, when missing, creates) the seed on first use; throws KubeError
  // while that fails, so the recipe's reconcile reports it and retries.
  std::string key_for(const std::string& ns, const std::string& recipe);

 private:
  std::string seed();

  const KubeClient& client_;
  std::string namespace_name_;
  std::mutex mutex_;
  std::string seed_;  // "" until read
};

}  // namespace nibble::kube
