#include "engine/backend/model_features.h"

#include "engine/backend/backend.h"

namespace nibble::backend {

std::vector<std::string> features_beyond_baseline(const model::ModelWeights& model,
                                                  const model::ModelDescription& description) {
  // None today: the last (an MTP module's and an EAGLE-3 head's input, the inner layers' hidden
  // states) runs on the CUDA backend since issue 42. A feature one backend lacks is listed here,
  // by the name a user reads, until it has it.
  (void)model;
  (void)description;
  return {};
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
