#include "controller/kube/render_flags.h"

#include <stdexcept>

#include "controller/recipe/recipe_parse.h"

namespace nibble::kube {
namespace {

std::string need(cli::FlagReader& flags) {
  std::string value = flags.value();
  if (value.empty()) throw std::invalid_argument(flags.flag() + " needs a value");
  return value;
}

}  // namespace

bool take_render_flag(cli::FlagReader& flags, RenderOptions& o) {
  const std::string& flag = flags.flag();
  if (flags.is("--namespace") || flags.is("-n")) {
    o.namespace_name = need(flags);
    if (!recipe::is_dns1123_label(o.namespace_name))
      throw std::invalid_argument(flag + ": '" + o.namespace_name + "' is not a DNS-1123 label");
  } else if (flags.is("--engine-image") || flags.is("--image")) {
    o.image = need(flags);
  } else if (flags.is("--image-pull-policy")) {
    o.image_pull_policy = need(flags);
    if (o.image_pull_policy != "Always" && o.image_pull_policy != "IfNotPresent" &&
        o.image_pull_policy != "Never")
      throw std::invalid_argument(flag + ": must be Always, IfNotPresent or Never");
  } else if (flags.is("--model-cache-pvc")) {
    o.model_cache.kind = ModelCache::Kind::kPersistentVolumeClaim;
    o.model_cache.claim_name = need(flags);
  } else if (flags.is("--model-cache-host-path")) {
    o.model_cache.kind = ModelCache::Kind::kHostPath;
    o.model_cache.host_path = need(flags);
    if (o.model_cache.host_path[0] != '/')
      throw std::invalid_argument(flag + ": must be an absolute path");
  } else if (flags.is("--model-cache-size-limit")) {
    o.model_cache.size_limit = need(flags);
  } else if (flags.is("--hf-token-secret")) {
    o.hf_token_secret = need(flags);
  } else if (flags.is("--hf-endpoint")) {
    o.hf_endpoint = need(flags);
  } else if (flags.is("--engine-startup-timeout")) {
    o.startup_timeout_seconds = int(flags.integer(10, 24 * 3600));
  } else if (flags.is("--engine-drain-seconds")) {
    o.drain_seconds = int(flags.integer(0, 3600));
  } else if (flags.is("--engine-cpu-request")) {
    o.requests.cpu = need(flags);
  } else if (flags.is("--engine-memory-request")) {
    o.requests.memory = need(flags);
  } else if (flags.is("--engine-ephemeral-storage-request")) {
    o.requests.ephemeral_storage = need(flags);
  } else if (flags.is("--engine-runtime-class")) {
    o.runtime_class = need(flags);
    if (!recipe::is_dns1123_label(o.runtime_class))
      throw std::invalid_argument(flag + ": '" + o.runtime_class + "' is not a DNS-1123 label");
  } else if (flags.is("--engine-image-pull-secret")) {
    o.image_pull_secrets.push_back(need(flags));
  } else if (flags.is("--pod-monitor")) {
    o.pod_monitor = true;
  } else {
    return false;
  }
  return true;
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
  --engine-cpu-request QTY       CPU each engine pod requests (default 2)
  --engine-memory-request QTY    memory each engine pod requests (default 16Gi)
  --engine-ephemeral-storage-request QTY  ephemeral storage each requests (default 1Gi)
  --engine-runtime-class NAME    runtimeClassName of engine pods (e.g. nvidia)
  --engine-image-pull-secret NAME  pull the engine image with this Secret (repeatable)
  --pod-monitor                  also a PodMonitor per recipe
)";
}

}  // namespace nibble::kube
