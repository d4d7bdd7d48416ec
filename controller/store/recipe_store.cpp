#include "controller/store/recipe_store.h"

#include <sstream>

#include "controller/recipe/model_root.h"
#include "controller/recipe/recipe_yaml.h"

namespace nibble::store {

std::string spec_hash(const recipe::ModelRecipe& r) {
  std::string key = r.source.original + "\n";
  // A draft model by its source: where it is placed does not change what runs.
  const std::string draft = r.engine.draft_model ? r.engine.draft_model->original : "";
  for (const std::string& a : recipe::engine_args(r, draft)) key += a + "\n";
  // FNV-1a, printed as hex: stable across runs and builds (std::hash is not).
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  std::ostringstream out;
  out << std::hex << h;
  return out.str();
}

recipe::ParseResult validate_recipe(const std::string& yaml_text,
                                    const std::filesystem::path& model_root) {
  recipe::ParseResult result = recipe::parse_model_recipe(yaml_text);
  if (result.ok()) recipe::check_model_roots(result.recipe, model_root, result.errors);
  return result;
}

}  // namespace nibble::store
