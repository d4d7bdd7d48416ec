#include "controller/reconcile/engine_command.h"

#include "controller/recipe/recipe_parse.h"

namespace nibble::reconcile {

std::vector<std::string> engine_serve_args(const recipe::ModelRecipe& recipe,
                                           const EngineListen& listen) {
  std::vector<std::string> args = {"serve",     "--model", listen.model_dir,           "--host",
                                   listen.host, "--port",  std::to_string(listen.port)};
  for (std::string& a : recipe::engine_args(recipe, listen.draft_model_dir))
    args.push_back(std::move(a));
  return args;
}

}  // namespace nibble::reconcile
