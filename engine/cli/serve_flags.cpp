#include "engine/cli/serve_flags.h"

#include <array>

namespace nibble::engine::cli {
namespace {

using enum FlagValue;
using enum FlagOwner;

// Keep in step with serve_usage() and value_flags() in serve_options.cpp, and backend_flags.cpp;
// test_serve_flags checks that every flag here parses and every flag the parser sets is here.
constexpr std::array kFlags = {
    ServeFlag{"model", kRequired, kController, ""},
    ServeFlag{"download-dir", kRequired, kController, ""},  // a directory: the controller's
    ServeFlag{"config", kRequired, kController, ""},
    ServeFlag{"host", kRequired, kController, ""},
    ServeFlag{"port", kRequired, kController, ""},
    ServeFlag{"served-model-name", kRequired, kController, ""},
    ServeFlag{"api-key", kRequired, kController, ""},
    ServeFlag{"api-key-file", kRequired, kController, ""},  // a file: the controller's alone
    ServeFlag{"metrics-require-key", kOptional, kRecipe, ""},
    // Which web pages may drive the engine is the operator's call, not a recipe's.
    ServeFlag{"allowed-origins", kRequired, kController, ""},
    ServeFlag{"max-model-len", kRequired, kRecipeField, "spec.engine.maxModelLen"},
    ServeFlag{"max-num-seqs", kRequired, kRecipeField, "spec.engine.maxNumSeqs"},
    ServeFlag{"max-num-batched-tokens", kRequired, kRecipeField, "spec.engine.maxNumBatchedTokens"},
    ServeFlag{"gpu-memory-utilization", kRequired, kRecipeField,
              "spec.engine.gpuMemoryUtilization"},
    ServeFlag{"kv-cache-dtype", kRequired, kRecipeField, "spec.engine.kvCacheDtype"},
    ServeFlag{"enable-prefix-caching", kOptional, kRecipeField, "spec.engine.enablePrefixCaching"},
    ServeFlag{"no-enable-prefix-caching", kNone, kRecipeField, "spec.engine.enablePrefixCaching"},
    ServeFlag{"device", kRequired, kRecipeField, "spec.engine.device"},
    ServeFlag{"quantization", kRequired, kRecipeField, "spec.engine.quantization"},
    ServeFlag{"enforce-eager", kOptional, kRecipe, ""},
    ServeFlag{"kv-cache-memory-bytes", kRequired, kRecipe, ""},
    ServeFlag{"max-queue-len", kRequired, kRecipe, ""},
    ServeFlag{"max-request-body-bytes", kRequired, kRecipe, ""},
    ServeFlag{"max-json-depth", kRequired, kRecipe, ""},
    ServeFlag{"max-prompt-bytes-per-token", kRequired, kRecipe, ""},
    ServeFlag{"drain-timeout", kRequired, kRecipe, ""},
    ServeFlag{"threads", kRequired, kRecipe, ""},
    ServeFlag{"http-threads", kRequired, kRecipe, ""},
    ServeFlag{"http-read-timeout", kRequired, kRecipe, ""},
    ServeFlag{"max-pending-connections-per-client", kRequired, kRecipe, ""},
    ServeFlag{"log-level", kRequired, kRecipe, ""},
    ServeFlag{"access-log", kOptional, kRecipe, ""},
    ServeFlag{"no-access-log", kNone, kRecipe, ""},
    ServeFlag{"log-stats-interval", kRequired, kRecipe, ""},
    ServeFlag{"disable-log-stats", kNone, kRecipe, ""},  // vLLM's name for interval 0
    ServeFlag{"tool-call-parser", kRequired, kRecipe, ""},
    ServeFlag{"enable-auto-tool-choice", kOptional, kRecipe, ""},
    ServeFlag{"exclude-tools-when-tool-choice-none", kOptional, kRecipe, ""},
    ServeFlag{"reasoning-parser", kRequired, kRecipe, ""},
    ServeFlag{"token-mask-overlap", kRequired, kRecipe, ""},
    ServeFlag{"token-mask-threads", kRequired, kRecipe, ""},
    ServeFlag{"speculative-config", kRequired, kRecipeField, "spec.engine.speculativeConfig"},
    // The backends' tuning (backend_flags.h; test_serve_flags checks every one is here).
    ServeFlag{"device-sampling", kRequired, kRecipe, ""},
    ServeFlag{"linear-overlap", kRequired, kRecipe, ""},
    ServeFlag{"w4a16-dense", kRequired, kRecipe, ""},
    ServeFlag{"cuda-step-timing", kRequired, kRecipe, ""},
    ServeFlag{"moe-routing", kRequired, kRecipe, ""},
    ServeFlag{"moe-fusions", kRequired, kRecipe, ""},
    ServeFlag{"moe-fused-router", kRequired, kRecipe, ""},
    ServeFlag{"moe-route-in-gemm", kRequired, kRecipe, ""},
    ServeFlag{"moe-one-launch", kRequired, kRecipe, ""},
    ServeFlag{"moe-overlap", kRequired, kRecipe, ""},
    ServeFlag{"w4a16-wgmma", kRequired, kRecipe, ""},
    ServeFlag{"w4a16-wgmma-cluster-sum", kRequired, kRecipe, ""},
    ServeFlag{"slice-short-k", kRequired, kRecipe, ""},
    ServeFlag{"flash-attention", kRequired, kRecipe, ""},
    ServeFlag{"flash-decode", kRequired, kRecipe, ""},
    ServeFlag{"decode-attention", kRequired, kRecipe, ""},
    ServeFlag{"decode-attention-overlap", kRequired, kRecipe, ""},
    ServeFlag{"small-kernel-overlap", kRequired, kRecipe, ""},
    ServeFlag{"decode-attention-blocks-per-sm", kRequired, kRecipe, ""},
};

}  // namespace

std::span<const ServeFlag> serve_flags() {
  return kFlags;
}

const ServeFlag* find_serve_flag(std::string_view name) {
  for (const ServeFlag& f : kFlags) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace nibble::engine::cli
