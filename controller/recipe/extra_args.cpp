#include "controller/recipe/extra_args.h"

#include <stdexcept>

#include "engine/cli/serve_flags.h"
#include "engine/cli/serve_options.h"

namespace nibble::recipe {
namespace {

using engine::cli::FlagOwner;
using engine::cli::FlagValue;

std::string field_of(std::size_t i) {
  return "spec.engine.extraArgs[" + std::to_string(i) + "]";
}

}  // namespace

void check_extra_args(const std::vector<std::string>& args, std::vector<FieldError>& errors) {
  const std::size_t errors_before = errors.size();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!arg.starts_with("--")) {
      errors.push_back({field_of(i), "expected a nibble-engine serve flag (--name), got '" + arg +
                                         "'; a flag's value follows it as the next item"});
      continue;
    }
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const engine::cli::ServeFlag* flag = engine::cli::find_serve_flag(name);
    if (flag == nullptr) {
      errors.push_back({field_of(i), "unknown nibble-engine serve flag '--" + name + "'"});
    } else if (flag->owner == FlagOwner::kController) {
      errors.push_back({field_of(i), "'--" + name +
                                         "' is set by the controller and cannot be given in a "
                                         "recipe"});
    } else if (flag->owner == FlagOwner::kRecipeField) {
      errors.push_back({field_of(i), "'--" + name + "' is set from " +
                                         std::string(flag->recipe_field) + "; set it there"});
    }
    // Skip the value so that it is not read as a flag.
    if (flag != nullptr && flag->value == FlagValue::kRequired && eq == std::string::npos) {
      if (i + 1 >= args.size()) {
        errors.push_back({field_of(i), "'--" + name + "' needs a value"});
      }
      ++i;
    }
  }
  if (errors.size() != errors_before) return;
  // Every flag may be set: let the engine's own parser judge the values, as it will at start.
  std::vector<std::string> command = {"serve", "--model", "/"};
  command.insert(command.end(), args.begin(), args.end());
  try {
    engine::cli::ServeOptions options;
    engine::cli::parse_serve_options(command, options);
  } catch (const std::invalid_argument& e) {
    errors.push_back({"spec.engine.extraArgs", e.what()});
  }
}

}  // namespace nibble::recipe
