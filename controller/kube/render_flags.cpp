#include "controller/kube/render_flags.h"

#include <stdexcept>

#include "controller/recipe/recipe_parse.h"

namespace nibble::kube {
namespace {

const std::string& need(const std::string& flag, const std::string* value) {
  if (value == nullptr || value->empty()) throw std::invalid_argument(flag + " needs a value");
  return *value;
}

int seconds(const std::string& flag, const std::string* value, int min, int max) {
  const std::string& text = need(flag, value);
  std::size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || n < min || n > max) {
    throw std::invalid_argument(flag + ": must be a whole number of seconds between " +
                                std::to_string(min) + " and " + std::to_string(max) + ", got '" +
                                text + "'");
  }
  return n;
}

}  // namespace

FlagUse apply_render_flag(const std::string& flag, const std::string* value, RenderOptions& o) {
  if (flag == "--namespace" || flag == "-n") {
    o.namespace_name = need(flag, value);
    if (!recipe::is_dns1123_label(o.namespace_name))
      throw std::invalid_argument(flag + ": '" + o.namespace_name + "' is not a DNS-1123 label");
  } else if (flag == "--engine-image" || flag == "--image") {
    o.image = need(flag, value);
  } else if (flag == "--image-pull-policy") {
    o.image_pull_policy = need(flag, value);
    if (o.image_pull_policy != "Always" && o.image_pull_policy != "IfNotPresent" &&
        o.image_pull_policy != "Never")
      throw std::invalid_argument(flag + ": must be Always, IfNotPresent or Never");
  } else if (flag == "--model-cache-pvc") {
    o.model_cache.kind = ModelCache::Kind::kPersistentVolumeClaim;
    o.model_cache.claim_name = need(flag, value);
  } else if (flag == "--model-cache-host-path") {
    o.model_cache.kind = ModelCache::Kind::kHostPath;
    o.model_cache.host_path = need(flag, value);
    if (o.model_cache.host_path[0] != '/')
      throw std::invalid_argument(flag + ": must be an absolute path");
  } else if (flag == "--model-cache-size-limit") {
    o.model_cache.size_limit = need(flag, value);
  } else if (flag == "--hf-token-secret") {
    o.hf_token_secret = need(flag, value);
  } else if (flag == "--hf-endpoint") {
    o.hf_endpoint = need(flag, value);
  } else if (flag == "--engine-startup-timeout") {
    o.startup_timeout_seconds = seconds(flag, value, 10, 24 * 3600);
  } else if (flag == "--engine-drain-seconds") {
    o.drain_seconds = seconds(flag, value, 0, 3600);
  } else if (flag == "--pod-monitor") {
    o.pod_monitor = true;
    return FlagUse::kNoValue;
  } else {
    return FlagUse::kNotMine;
  }
  return FlagUse::kTookValue;
}

const char* render_flags_usage() {
  return R"(  --namespace NS                 namespace of the objects (default: default)
  --engine-image IMAGE           engine image (default nibble/nibble-engine:0.1.0; alias --image)
  --image-pull-policy POLICY     Always | IfNotPresent (default) | Never
  --model-cache-pvc CLAIM        keep downloaded models on this PersistentVolumeClaim
  --model-cache-host-path DIR    ... or in this directory of each node (default: emptyDir)
  --model-cache-size-limit QTY   size limit of the emptyDir cache (e.g. 200Gi)
  --hf-token-secret NAME         Secret with an HF_TOKEN key for gated models
  --hf-endpoint URL              Hugging Face mirror for model downloads
  --engine-startup-timeout SECS  time allowed for model loading (default 1800)
  --engine-drain-seconds SECS    grace period for in-flight requests (default 120)
  --pod-monitor                  also a PodMonitor per recipe
)";
}

}  // namespace nibble::kube
