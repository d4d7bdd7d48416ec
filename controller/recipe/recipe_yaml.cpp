#include "controller/recipe/recipe_yaml.h"

#include <yaml-cpp/yaml.h>

namespace nibble::recipe {

std::string to_yaml(const ModelRecipe& r) {
  YAML::Emitter out;
  out.SetDoublePrecision(6);  // 0.8, not 0.80000000000000004
  out << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << kApiVersion;
  out << YAML::Key << "kind" << YAML::Value << kKind;
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << r.name;
  if (!r.labels.empty()) out << YAML::Key << "labels" << YAML::Value << r.labels;
  out << YAML::EndMap;

  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "source" << YAML::Value << r.source.original;
  out << YAML::Key << "servedName" << YAML::Value << r.served_name;
  out << YAML::EndMap;

  const EngineSettings& e = r.engine;
  out << YAML::Key << "engine" << YAML::Value << YAML::BeginMap;
  if (e.max_model_len) out << YAML::Key << "maxModelLen" << YAML::Value << *e.max_model_len;
  out << YAML::Key << "maxNumSeqs" << YAML::Value << e.max_num_seqs;
  if (e.max_num_batched_tokens)
    out << YAML::Key << "maxNumBatchedTokens" << YAML::Value << *e.max_num_batched_tokens;
  out << YAML::Key << "kvCacheDtype" << YAML::Value << e.kv_cache_dtype;
  out << YAML::Key << "gpuMemoryUtilization" << YAML::Value << e.gpu_memory_utilization;
  out << YAML::Key << "enablePrefixCaching" << YAML::Value << e.enable_prefix_caching;
  if (!e.quantization.empty()) out << YAML::Key << "quantization" << YAML::Value << e.quantization;
  out << YAML::Key << "device" << YAML::Value << e.device;
  if (!e.speculative_config.empty())
    out << YAML::Key << "speculativeConfig" << YAML::Value << e.speculative_config;
  if (!e.extra_args.empty())
    out << YAML::Key << "extraArgs" << YAML::Value << YAML::Flow << e.extra_args;
  out << YAML::EndMap;

  out << YAML::Key << "replicas" << YAML::Value << YAML::Flow << YAML::BeginMap;
  out << YAML::Key << "min" << YAML::Value << r.replicas.min;
  out << YAML::Key << "max" << YAML::Value << r.replicas.max;
  if (r.replicas.desired) out << YAML::Key << "desired" << YAML::Value << *r.replicas.desired;
  out << YAML::EndMap;

  const Autoscaling& a = r.autoscaling;
  out << YAML::Key << "autoscaling" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "enabled" << YAML::Value << a.enabled;
  out << YAML::Key << "metric" << YAML::Value << a.metric;
  out << YAML::Key << "targetPerReplica" << YAML::Value << a.target_per_replica;
  out << YAML::Key << "scaleDownDelaySeconds" << YAML::Value << a.scale_down_delay_seconds;
  out << YAML::Key << "idleSecondsBeforeZero" << YAML::Value << a.idle_seconds_before_zero;
  out << YAML::EndMap;

  out << YAML::Key << "placement" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "soloOnly" << YAML::Value << r.placement.solo_only;
  if (!r.placement.node_selector.empty()) {
    out << YAML::Key << "nodeSelector" << YAML::Value << r.placement.node_selector;
  }
  if (!r.placement.tolerations.empty()) {
    out << YAML::Key << "tolerations" << YAML::Value << r.placement.tolerations;
  }
  out << YAML::EndMap;
  const recipe::Resources& res = r.resources;
  if (!res.cpu.empty() || !res.memory.empty() || !res.ephemeral_storage.empty()) {
    out << YAML::Key << "resources" << YAML::Value << YAML::BeginMap;
    if (!res.cpu.empty()) out << YAML::Key << "cpu" << YAML::Value << res.cpu;
    if (!res.memory.empty()) out << YAML::Key << "memory" << YAML::Value << res.memory;
    if (!res.ephemeral_storage.empty())
      out << YAML::Key << "ephemeralStorage" << YAML::Value << res.ephemeral_storage;
    out << YAML::EndMap;
  }
  out << YAML::EndMap;  // spec
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace nibble::recipe
