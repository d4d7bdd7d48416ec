#include "controller/recipe/recipe_scale.h"

#include "controller/recipe/recipe_parse.h"
#include "controller/recipe/recipe_yaml.h"

namespace nibble::recipe {

ScaleResult scale_recipe(const std::string& recipe_yaml, int replicas) {
  ScaleResult result;
  ParseResult parsed = parse_model_recipe(recipe_yaml);
  if (!parsed.ok()) {
    result.error =
        "the stored recipe is invalid; fix it with nibble apply first:\n" + parsed.error_text();
    return result;
  }
  ModelRecipe& r = parsed.recipe;
  if (replicas < r.replicas.min || replicas > r.replicas.max) {
    result.error = "replicas " + std::to_string(replicas) + " is outside spec.replicas [min " +
                   std::to_string(r.replicas.min) + ", max " + std::to_string(r.replicas.max) +
                   "]; change spec.replicas with nibble apply";
    return result;
  }
  r.replicas.desired = replicas;
  result.yaml = to_yaml(r);
  result.autoscaling = r.autoscaling.enabled;
  return result;
}

}  // namespace nibble::recipe
