// MistralForCausalLM: Llama's layers. Its sliding window, where set, caps the context instead
// of being implemented: within the window attention is exact.
#include <algorithm>

#include "engine/model/architectures/architecture.h"

namespace nibble::model::architectures {
namespace {

void read(const ConfigReader& r, ModelConfig& c) {
  refuse_attention_bias(r);
  if (r.has("sliding_window")) c.max_context = std::min(c.max_context, r.integer("sliding_window"));
}

LayerSpec layer(const ModelConfig& c, int l) {
  return kLlama.layer(c, l);
}

}  // namespace

const Architecture kMistral{Arch::Mistral, "MistralForCausalLM", {}, read, layer};

}  // namespace nibble::model::architectures
