#pragma once
// spec.engine.speculativeConfig: vLLM's --speculative-config JSON, judged by the engine's own
// parser (engine/spec/speculative_config.h). draft_model's and eagle3's `model` (a draft model,
// an EAGLE-3 head) names weights the engine will read, so in a recipe it is a model source as
// spec.model.source is (hf://org/name[@revision], file:///abs/path or an absolute path, with no
// ".." part; not a relative path, which vLLM would read as a Hub id and spec.model.source as a
// directory), confined to --model-root as that is (model_root.h) and placed by whoever starts the
// engine as the main model is: downloaded into the model cache, or mounted from the node. The
// engine never gets the recipe's text: it gets the JSON engine_speculative_config writes from the
// checked fields, with the directory where the draft's weights were placed, so a recipe cannot pass
// the engine anything else.
#include <optional>
#include <string>
#include <vector>

#include "controller/recipe/recipe_parse.h"

namespace nibble::recipe {

inline constexpr const char* kSpeculativeConfigField = "spec.engine.speculativeConfig";

// Checks the field's text; errors go under kSpeculativeConfigField. Returns the draft model's
// or head's source for methods draft_model and eagle3, nullopt otherwise (and on errors).
std::optional<ModelSource> parse_speculative_field(const std::string& json,
                                                   std::vector<FieldError>& errors);

// The engine's --speculative-config for a text parse_speculative_field accepted: method,
// num_speculative_tokens and ngram's prompt_lookup_min/max as parsed, and for draft_model and
// eagle3 the model `draft_model_dir`. Throws std::invalid_argument for a text it would refuse.
std::string engine_speculative_config(const std::string& json, const std::string& draft_model_dir);

}  // namespace nibble::recipe
