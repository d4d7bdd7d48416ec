#pragma once
// YAML or JSON (a YAML subset) → ModelRecipe, with defaults and validation. Every problem is
// reported with its field path (spec.replicas.max) and reason; unknown fields are problems too,
// as with kubectl's strict validation, so a typo never silently changes nothing.
#include <string>
#include <vector>

#include "controller/recipe/model_recipe.h"

namespace nibble::recipe {

struct FieldError {
  std::string field;    // e.g. "spec.engine.maxNumSeqs"
  std::string message;  // e.g. "must be between 1 and 65536, got 0"
};

struct ParseResult {
  ModelRecipe recipe;  // valid only when errors is empty
  std::vector<FieldError> errors;
  bool ok() const { return errors.empty(); }
  std::string error_text() const;  // one "field: message" per line
};

ParseResult parse_model_recipe(const std::string& text);
// hf://org/name[@revision], file:///abs/path or a path; errors are reported under `field`
// (spec.model.source, or spec.engine.speculativeConfig for a draft model). A Hub org, name or
// revision that would step out of its cache directory ("..", ".") is refused.
ModelSource parse_model_source(const std::string& source, std::vector<FieldError>& errors,
                               const std::string& field = "spec.model.source");
bool is_dns1123_label(const std::string& name);

// The `nibble-engine serve` arguments a replica of this recipe runs with (model path and
// port are added by the backend that starts it). `draft_model_dir`: where whoever starts the
// engine placed a draft_model's weights (engine.draft_model; unused without one), written into
// --speculative-config (speculative_recipe.h).
std::vector<std::string> engine_args(const ModelRecipe& recipe, const std::string& draft_model_dir);

}  // namespace nibble::recipe
