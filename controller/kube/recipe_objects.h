#pragma once
// The pure function recipe → the Kubernetes objects that run it: a Deployment of engine pods,
// a Service in front of them, a PodDisruptionBudget and, optionally, a PodMonitor. The Kubernetes
// backend applies exactly these (server-side apply); `nibble render` prints them. No I/O, no clock:
// the same recipe, revision and options always give the same objects.
//
// The Deployment's pods run `nibble-engine` with the flags local mode passes
// (reconcile::engine_serve_args), request one `nvidia.com/gpu` (none for device: cpu) and the
// CPU, memory and ephemeral storage of RenderOptions::requests, keep to
// the recipe's nodeSelector and tolerations, and with soloOnly carry a required pod
// anti-affinity on the node's hostname against every other nibble engine (in every
// namespace). Weights live on a model cache volume mounted at /models (emptyDir by default, a
// PVC or a hostPath by controller setting); hf:// models are fetched into it by an init
// container (`nibble pull`, from the engine image); file paths are mounted read-only from the
// node. A draft model (speculativeConfig's draft_model) is placed the same way, with its own
// init container or mount. Probes hit /health (503 while loading and draining): a generous
// startup probe for model loading, then readiness and liveness; the grace period lets in-flight
// requests drain.
// The pod template carries the revision (spec hash) so a spec change rolls out, one surge pod
// at a time, never below the ready pods there were. Every object is owned by the ModelRecipe
// (ownerReferences with its uid), so deleting the recipe garbage-collects them. The engine
// serves its API only with the recipe's key, read from the Secret engine_key_secret_name()
// mounted read-only (the Secret itself is created by the controller, never printed).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "controller/recipe/model_recipe.h"

namespace nibble::kube {

inline constexpr const char* kEngineName = "nibble-engine";  // app.kubernetes.io/name
inline constexpr const char* kRecipeLabel = "nibble.dev/recipe";
inline constexpr const char* kRevisionLabel = "nibble.dev/revision";
inline constexpr const char* kSpecHashAnnotation = "nibble.dev/spec-hash";
inline constexpr const char* kModelMountPath = "/models";
inline constexpr int kEnginePort = 8000;
// The engine's API key: a Secret per recipe (engine_keys.h) mounted here, passed with
// --api-key-file, so only the router (which holds the key) reaches the engine's API.
inline constexpr const char* kEngineKeyMountPath = "/var/run/nibble/engine-key";
inline constexpr const char* kEngineKeyField = "api-key";  // the key in the Secret's data

struct ModelCache {
  enum class Kind { kEmptyDir, kPersistentVolumeClaim, kHostPath };
  Kind kind = Kind::kEmptyDir;
  std::string claim_name;  // kPersistentVolumeClaim: an existing claim (ReadWriteMany to share)
  std::string host_path;   // kHostPath: a directory on every GPU node
  std::string size_limit;  // kEmptyDir: e.g. "200Gi"; "" for none
};

// "emptyDir", "emptyDir sizeLimit=200Gi", "pvc/NAME" or "hostPath DIR", for logs and
// --check-options.
std::string describe(const ModelCache& cache);

// What every engine pod requests beyond its GPU unless its recipe says (spec.resources), so it is
// scheduled with room for the engine (Burstable QoS, not BestEffort, which is evicted first). No
// limits: a memory limit would OOM-kill an engine whose weights pass through host memory while
// loading.
struct EngineRequests {
  std::string cpu = "2";
  std::string memory = "16Gi";
  std::string ephemeral_storage = "1Gi";  // logs and /tmp; an emptyDir model cache counts too
};

// Controller settings that shape every recipe's objects.
struct RenderOptions {
  std::string namespace_name = "default";
  std::string image = "nibble/nibble-engine:0.1.0";
  std::string image_pull_policy = "IfNotPresent";
  ModelCache model_cache;
  std::string hf_token_secret;  // Secret with key HF_TOKEN for gated models; "" for none
  std::string hf_endpoint;      // HF_ENDPOINT for a mirror; "" for the Hub
  std::int64_t run_as_user = 65532;
  int startup_timeout_seconds = 1800;  // model loading may take this long
  int drain_seconds = 120;             // in-flight requests get this long after SIGTERM
  bool pod_monitor = false;            // one PodMonitor per recipe (the install has a shared one)
  EngineRequests requests;
  std::string runtime_class;                    // runtimeClassName (e.g. nvidia); "" for none
  std::vector<std::string> image_pull_secrets;  // Secrets for a private engine image
  std::vector<std::string> extra_engine_args;   // after the recipe's own flags
};

// The ModelRecipe the objects belong to. Without a uid (a recipe read from a file, not from
// the API server) the objects carry no ownerReferences.
struct Owner {
  std::string uid;
};

struct RecipeObjects {
  nlohmann::json deployment;
  nlohmann::json service;
  // At most one engine pod of the recipe evicted at a time (node drains, upgrades).
  nlohmann::json disruption_budget;
  nlohmann::json pod_monitor;               // null unless RenderOptions::pod_monitor
  std::vector<nlohmann::json> all() const;  // in apply order
};

// Thrown for a recipe that cannot run on Kubernetes (a relative model path, a toleration
// operator or effect the API server refuses): what the CRD's validation rejects.
class RenderError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// `revision` is the spec hash (store::spec_hash); `replicas` what the autoscaler wants.
RecipeObjects recipe_objects(const recipe::ModelRecipe& recipe, const std::string& revision,
                             int replicas, const Owner& owner, const RenderOptions& options);

// The labels selecting a recipe's engine pods (the Deployment's and the Service's selector).
nlohmann::json selector_labels(const std::string& recipe);
// The same as a label selector string ("k=v,k=v"): the ModelRecipe's status.selector.
std::string pod_selector(const std::string& recipe);
// The DNS-1035 name of the recipe's Service (recipe names may start with a digit).
std::string service_name(const std::string& recipe);
// The Secret holding the recipe's engine key, and that Secret with `key` in it (immutable,
// owned by the ModelRecipe when the owner has a uid).
std::string engine_key_secret_name(const std::string& recipe);
nlohmann::json engine_key_secret(const recipe::ModelRecipe& recipe, const std::string& key,
                                 const Owner& owner, const RenderOptions& options);
// Where the engine finds the weights inside the pod.
std::string model_dir_in_pod(const recipe::ModelSource& source);

}  // namespace nibble::kube
