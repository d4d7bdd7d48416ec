#pragma once
// The command-line flags that set RenderOptions, shared by `nibble render` and the controller's
// Kubernetes mode so both shape a recipe's objects the same way:
//   --namespace NS                 where the objects go (default "default")
//   --engine-image IMAGE           the engine image (alias --image)
//   --image-pull-policy POLICY     Always | IfNotPresent | Never
//   --model-cache-pvc CLAIM        the model cache on an existing PersistentVolumeClaim
//   --model-cache-host-path DIR    ... or on a directory of every node
//   --model-cache-size-limit QTY   sizeLimit of the default emptyDir cache (e.g. 200Gi)
//   --hf-token-secret NAME         Secret whose HF_TOKEN key the model download uses
//   --hf-endpoint URL              a Hugging Face mirror
//   --engine-startup-timeout SECS  how long model loading may take (startup probe)
//   --engine-drain-seconds SECS    termination grace period for in-flight requests
//   --pod-monitor                  a PodMonitor per recipe
#include <string>

#include "controller/kube/recipe_objects.h"

namespace nibble::kube {

enum class FlagUse { kNotMine, kTookValue, kNoValue };

// Applies `flag` (with `value`, when it takes one) to `options`. Returns kNotMine for flags it
// does not know; throws std::invalid_argument for a bad value.
FlagUse apply_render_flag(const std::string& flag, const std::string* value,
                          RenderOptions& options);
// The usage lines for these flags.
const char* render_flags_usage();

}  // namespace nibble::kube
