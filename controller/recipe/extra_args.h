#pragma once
// spec.engine.extraArgs checked against nibble-engine serve's own flag table
// (engine/cli/serve_flags.h): every flag must exist, be one a recipe may set (not one the
// controller owns, such as --host, --port, --config or --api-key, and not one a recipe field
// already sets) and carry a value the engine accepts. Errors name the flag.
#include <string>
#include <vector>

#include "controller/recipe/recipe_parse.h"

namespace nibble::recipe {

// Appends one error per offending argument, with the field path spec.engine.extraArgs[i].
void check_extra_args(const std::vector<std::string>& args, std::vector<FieldError>& errors);

}  // namespace nibble::recipe
