#pragma once
// nibble-controller --model-root: recipes' local model paths (file:///... and plain paths, a
// draft model's too) must lie inside this directory. Both are resolved first (symlinks, "..",
// relative parts against the controller's working directory), so neither a "../" nor a link inside
// the root that points outside it gets through. hf:// sources go to the controller's cache and are
// not affected.
#include <filesystem>
#include <string>
#include <vector>

#include "controller/recipe/recipe_parse.h"

namespace nibble::recipe {

// Appends an error under `field` when a local path resolves outside `root`.
// An empty root confines nothing.
void check_model_root(const ModelSource& source, const std::filesystem::path& root,
                      std::vector<FieldError>& errors,
                      const std::string& field = "spec.model.source");

// check_model_root for every model a recipe names: spec.model.source and a draft_model's
// model (spec.engine.speculativeConfig).
void check_model_roots(const ModelRecipe& recipe, const std::filesystem::path& root,
                       std::vector<FieldError>& errors);

}  // namespace nibble::recipe
