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
//   --engine-cpu-request QTY, --engine-memory-request QTY, --engine-ephemeral-storage-request QTY
//                                  what each engine pod requests besides its GPU
//   --engine-runtime-class NAME    runtimeClassName of engine pods
//   --engine-image-pull-secret NAME  imagePullSecrets of engine pods (repeatable)
//   --pod-monitor                  a PodMonitor per recipe
#include "cli/flag_reader.h"
#include "controller/kube/recipe_objects.h"

namespace nibble::kube {

// Takes the current flag of `flags` (`--flag value` or `--flag=value`) into `options` when it is
// one of the above; false for any other flag. Throws std::invalid_argument for a bad value.
bool take_render_flag(cli::FlagReader& flags, RenderOptions& options);
// The usage lines for these flags.
const char* render_flags_usage();

}  // namespace nibble::kube
