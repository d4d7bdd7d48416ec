#pragma once
// A recipe's local model path written relative ("models/m"; file:// must be absolute already)
// means the directory of whoever applies it, but the controller would resolve it against its
// own working directory. So the writers resolve it where they know the base: `nibble apply`
// against its working directory, nibble-controller -f against its own; the controller's API,
// which cannot know a client's directory, refuses it.
#include <filesystem>
#include <string>

#include "controller/recipe/recipe_parse.h"

namespace nibble::recipe {

bool has_relative_model_path(const ModelRecipe& recipe);

// Each document of a multi-document YAML text whose recipe parses and has a relative model
// path, written again with that path made absolute against `base` (normalized, symlinks kept)
// and its defaults filled in (to_yaml); other documents, invalid ones included, unchanged.
std::string with_absolute_model_paths(const std::string& yaml_documents,
                                      const std::filesystem::path& base);

}  // namespace nibble::recipe
