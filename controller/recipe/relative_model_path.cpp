#include "controller/recipe/relative_model_path.h"

#include "controller/recipe/recipe_yaml.h"
#include "controller/recipe/yaml_documents.h"

namespace nibble::recipe {

bool has_relative_model_path(const ModelRecipe& r) {
  return r.source.kind == ModelSource::Kind::kFile && !r.source.path.empty() &&
         !std::filesystem::path(r.source.path).is_absolute();
}

std::string with_absolute_model_paths(const std::string& yaml_documents,
                                      const std::filesystem::path& base) {
  std::string out;
  for (const std::string& doc : split_yaml_documents(yaml_documents)) {
    ParseResult parsed = parse_model_recipe(doc);
    std::string text = doc;
    if (parsed.ok() && has_relative_model_path(parsed.recipe)) {
      const std::string absolute = (base / parsed.recipe.source.path).lexically_normal().string();
      parsed.recipe.source.path = absolute;
      parsed.recipe.source.original = absolute;
      text = to_yaml(parsed.recipe);
    }
    out += "---\n" + text + (text.ends_with('\n') ? "" : "\n");
  }
  return out;
}

}  // namespace nibble::recipe
