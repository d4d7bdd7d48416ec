#pragma once
// The flags of `nibble-engine serve` in one table, shared by the engine's option parser (which
// flags exist and which take a value) and the controller's recipe validation (which of them a
// recipe's spec.engine.extraArgs may set). A flag missing here is unknown to both.
#include <span>
#include <string_view>

namespace nibble::engine::cli {

enum class FlagValue {
  kRequired,  // --name VALUE or --name=VALUE
  kNone,      // a switch: --name
  kOptional,  // a switch that also takes --name=VALUE (booleans: --enable-prefix-caching=false)
};

enum class FlagOwner {
  kRecipe,       // a recipe may set it through spec.engine.extraArgs
  kRecipeField,  // the controller sets it from a recipe field (recipe_field names it)
  kController,   // only whoever starts the engine: where it listens, what it serves, secrets,
                 // and any flag whose value names a file the engine would read
};

struct ServeFlag {
  std::string_view name;  // long name without the leading dashes
  FlagValue value;
  FlagOwner owner;
  std::string_view recipe_field;  // for kRecipeField, e.g. "spec.engine.maxNumSeqs"
};

std::span<const ServeFlag> serve_flags();
// nullptr when `name` (without dashes) is not a serve flag.
const ServeFlag* find_serve_flag(std::string_view name);

}  // namespace nibble::engine::cli
