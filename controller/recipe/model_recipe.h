#pragma once
// ModelRecipe (apiVersion nibble.dev/v1alpha1): the desired state of one served model.
// docs/recipes.md documents every field; defaults are applied by parse_model_recipe.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace nibble::recipe {

inline constexpr const char* kApiVersion = "nibble.dev/v1alpha1";
inline constexpr const char* kKind = "ModelRecipe";

// Where the weights come from: hf://org/name[@revision], file:///abs/path, or a plain path.
struct ModelSource {
  enum class Kind { kHuggingFace, kFile };
  Kind kind = Kind::kFile;
  std::string repo;      // org/name, for kHuggingFace
  std::string revision;  // default "main"
  std::string path;      // for kFile
  std::string original;  // as written in the recipe
};

struct EngineSettings {  // each maps to one `nibble-engine serve` flag
  std::optional<int> max_model_len;
  int max_num_seqs = 256;
  std::optional<int> max_num_batched_tokens;  // unset: the engine's default for its device
  std::string kv_cache_dtype = "auto";        // auto | bf16 | fp8
  double gpu_memory_utilization = 0.9;
  bool enable_prefix_caching = true;
  std::string quantization;     // "" | nvfp4
  std::string device = "auto";  // auto | cpu | cuda
  // spec.engine.speculativeConfig as written: vLLM's --speculative-config JSON, checked when
  // parsed (speculative_recipe.h); "" for none. The engine gets it rewritten by the controller.
  std::string speculative_config;
  // Its draft model's or EAGLE-3 head's weights (methods draft_model, eagle3), placed as `source`
  // is.
  std::optional<ModelSource> draft_model;
  std::vector<std::string> extra_args;  // passed through as they are
};

struct Replicas {
  int min = 1;
  int max = 1;
  // spec.replicas.desired, the scale subresource's field. With the built-in autoscaler on, the
  // count it last published (on Kubernetes it writes it here) and where it resumes; with it off
  // (autoscaling.enabled false), what kubectl scale, an HPA or KEDA wrote: that many replicas,
  // clamped to [min, max]. Unset: min.
  std::optional<int> desired = std::nullopt;
};

struct Autoscaling {
  bool enabled = true;  // false: replicas follow spec.replicas.desired (the scale subresource)
  std::string metric = "inflight";  // inflight | running | waiting | kv_cache_usage
  double target_per_replica = 8;
  int scale_down_delay_seconds = 300;
  int idle_seconds_before_zero = 600;  // with replicas.min 0: idle time before scaling to zero
};

struct Placement {
  bool solo_only = false;
  std::map<std::string, std::string> node_selector;
  std::vector<std::map<std::string, std::string>> tolerations;
};

// What each engine pod requests beyond its GPU (Kubernetes quantities, e.g. "4", "500m", "32Gi");
// "" takes the controller's default (--engine-cpu-request and its siblings). Local mode ignores
// them.
struct Resources {
  std::string cpu;
  std::string memory;
  std::string ephemeral_storage;
};

struct ModelRecipe {
  std::string name;  // metadata.name, a DNS-1123 label
  std::map<std::string, std::string> labels;
  std::int64_t generation = 1;  // bumped by the store on every spec change
  ModelSource source;
  std::string served_name;  // default: name
  EngineSettings engine;
  Replicas replicas;
  Autoscaling autoscaling;
  Placement placement;
  Resources resources;
};

}  // namespace nibble::recipe
