#pragma once
// The command line of a replica's engine (`nibble-engine serve ...`), the same wherever it
// runs: the local backend execs it, the Kubernetes Deployment (controller/kube/recipe_objects.h)
// puts it in the engine container's args. One function, so both modes pass exactly the flags
// the recipe asks for.
#include <string>
#include <vector>

#include "controller/recipe/model_recipe.h"

namespace nibble::reconcile {

struct EngineListen {
  std::string model_dir;  // where the engine finds the weights
  std::string host;       // 127.0.0.1 locally, 0.0.0.0 in a pod
  int port = 0;
  // Where it finds a draft_model's weights (the recipe's engine.draft_model); "" without one.
  std::string draft_model_dir = "";
};

// "serve --model DIR --host H --port P" followed by the recipe's engine flags
// (recipe::engine_args: served name, batch limits, KV cache, speculative decoding with the
// draft model at draft_model_dir, extra args).
std::vector<std::string> engine_serve_args(const recipe::ModelRecipe& recipe,
                                           const EngineListen& listen);

}  // namespace nibble::reconcile
