#pragma once
// ModelRecipe → YAML, the form `nibble import` prints and the state directory stores.
// parse_model_recipe(to_yaml(r)) gives r back.
#include <string>

#include "controller/recipe/model_recipe.h"

namespace nibble::recipe {

std::string to_yaml(const ModelRecipe& recipe);

}  // namespace nibble::recipe
