#include "engine/backend/model_features.h"

#include "engine/backend/backend.h"

namespace nibble::backend {

std::vector<std::string> features_beyond_baseline(const model::ModelWeights& model,
                                                  const model::ModelDescription& description) {
  (void)model;
  std::vector<std::string> used;
  const auto note = [&](bool uses, const char* name) {
    if (uses) used.emplace_back(name);
  };
  note(description.input == model::ModelInput::kEagle3, "an EAGLE-3 head's input (eagle3)");
  return used;
}

void refuse_features_beyond_baseline(const model::ModelWeights& model, std::string_view backend) {
  const auto used = features_beyond_baseline(model, model::describe_model(model.config));
  if (used.empty()) return;
  std::string list;
  for (const auto& f : used) list += (list.empty() ? "" : ", ") + f;
  throw BackendError(std::string(backend) + " backend: " + model.config.architecture + " uses " +
                     list + ", which the " + std::string(backend) +
                     " backend does not implement yet; run it with --device cpu");
}

}  // namespace nibble::backend
