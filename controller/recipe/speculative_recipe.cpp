#include "controller/recipe/speculative_recipe.h"

#include <nlohmann/json.hpp>

#include <filesystem>

#include "engine/spec/speculative_config.h"

namespace nibble::recipe {

std::optional<ModelSource> parse_speculative_field(const std::string& json,
                                                   std::vector<FieldError>& errors) {
  spec::SpeculativeConfig config;
  try {
    config = spec::parse_speculative_config(json);
  } catch (const spec::SpeculativeConfigError& e) {
    errors.push_back({kSpeculativeConfigField, e.what()});
    return std::nullopt;
  }
  // draft_model's model and eagle3's head are weights the engine loads beside the target.
  if (config.method != spec::SpecMethod::kDraftModel && config.method != spec::SpecMethod::kEagle3)
    return std::nullopt;

  std::vector<FieldError> source_errors;
  ModelSource draft = parse_model_source(config.model, source_errors, kSpeculativeConfigField);
  if (source_errors.empty() && draft.kind == ModelSource::Kind::kFile) {
    const std::filesystem::path path(draft.path);
    if (!path.is_absolute()) {
      source_errors.push_back(
          {kSpeculativeConfigField,
           "'" + config.model +
               "' is a relative path; write hf://org/name for a Hub model or the "
               "absolute path of its directory"});
    } else {
      for (const std::filesystem::path& part : path) {
        if (part == "..") {
          source_errors.push_back({kSpeculativeConfigField, "'" + config.model +
                                                                "' has a '..' part; write the "
                                                                "path plainly"});
          break;
        }
      }
    }
  }
  for (FieldError& e : source_errors)
    errors.push_back(
        {e.field, std::string(spec::method_name(config.method)) + "'s model: " + e.message});
  if (!source_errors.empty()) return std::nullopt;
  return draft;
}

std::string engine_speculative_config(const std::string& json, const std::string& draft_model_dir) {
  const spec::SpeculativeConfig config = spec::parse_speculative_config(json);
  nlohmann::json out = {{"method", spec::method_name(config.method)},
                        {"num_speculative_tokens", config.num_speculative_tokens}};
  switch (config.method) {
    case spec::SpecMethod::kNgram:
      out["prompt_lookup_min"] = config.prompt_lookup_min;
      out["prompt_lookup_max"] = config.prompt_lookup_max;
      break;
    case spec::SpecMethod::kDraftModel:
    case spec::SpecMethod::kEagle3:
      if (draft_model_dir.empty())
        throw std::invalid_argument(std::string(spec::method_name(config.method)) +
                                    ": no directory was given for its model");
      out["model"] = draft_model_dir;
      break;
    case spec::SpecMethod::kMtp:  // the target's own module: no other field
      break;
  }
  return out.dump();
}

}  // namespace nibble::recipe
