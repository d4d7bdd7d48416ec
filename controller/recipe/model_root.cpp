#include "controller/recipe/model_root.h"

#include <algorithm>

#include "controller/recipe/speculative_recipe.h"

namespace nibble::recipe {

namespace fs = std::filesystem;

void check_model_root(const ModelSource& source, const fs::path& root,
                      std::vector<FieldError>& errors, const std::string& field) {
  if (root.empty() || source.kind != ModelSource::Kind::kFile || source.path.empty()) return;
  std::error_code ec;
  // weakly_canonical follows every symlink of the part that exists and folds ".." in the rest.
  const fs::path resolved_root = fs::weakly_canonical(fs::absolute(root, ec), ec);
  const fs::path resolved = fs::weakly_canonical(fs::absolute(source.path, ec), ec);
  if (ec) {
    errors.push_back({field, "cannot resolve '" + source.path + "': " + ec.message()});
    return;
  }
  // Inside means the root's components are a prefix of the path's (not a string prefix:
  // /models-evil is not inside /models).
  std::vector<fs::path> root_parts, path_parts;
  for (const fs::path& p : resolved_root) {
    if (!p.empty()) root_parts.push_back(p);
  }
  for (const fs::path& p : resolved) {
    if (!p.empty()) path_parts.push_back(p);
  }
  const bool inside = path_parts.size() >= root_parts.size() &&
                      std::equal(root_parts.begin(), root_parts.end(), path_parts.begin());
  if (!inside) {
    errors.push_back({field, "'" + source.original + "' resolves to " + resolved.string() +
                                 ", outside the controller's --model-root " +
                                 resolved_root.string()});
  }
}

void check_model_roots(const ModelRecipe& recipe, const fs::path& root,
                       std::vector<FieldError>& errors) {
  check_model_root(recipe.source, root, errors);
  if (recipe.engine.draft_model)
    check_model_root(*recipe.engine.draft_model, root, errors, kSpeculativeConfigField);
}

}  // namespace nibble::recipe
