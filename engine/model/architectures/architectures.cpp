#include <algorithm>
#include <array>

#include "engine/model/architectures/architecture.h"

namespace nibble::model {
namespace {

const std::array<const Architecture*, 9> kAll = {
    &architectures::kLlama,     &architectures::kMistral,     &architectures::kQwen2,
    &architectures::kQwen3,     &architectures::kQwen3Moe,    &architectures::kGptOss,
    &architectures::kQwen3Next, &architectures::kLlamaEagle3, &architectures::kEagle3Llama};

}  // namespace

std::span<const Architecture* const> supported_architectures() {
  return kAll;
}

const Architecture* find_architecture(std::string_view hf_name) {
  for (const Architecture* a : kAll)
    if (a->hf_name == hf_name) return a;
  return nullptr;
}

const Architecture& architecture_of(Arch arch) {
  for (const Architecture* a : kAll)
    if (a->arch == arch) return *a;
  throw ModelError("no description of architecture #" + std::to_string(int(arch)));
}

void refuse_attention_bias(const ConfigReader& r) {
  if (r.boolean_or("attention_bias", false))
    r.fail("attention_bias",
           "attention biases are only implemented for Qwen2 (q, k, v) and gpt-oss");
}

FfnSpec dense_mlp(const ModelConfig& c) {
  FfnSpec f;
  f.kind = FfnKind::kMlp;
  f.mlp.intermediate_size = c.intermediate_size;
  return f;
}

ModelDescription describe_model(const ModelConfig& c) {
  const Architecture& a = architecture_of(c.arch);
  ModelDescription d;
  d.tied_embeddings = c.tie_word_embeddings;
  d.layers.reserve(std::size_t(std::max(c.num_layers, 0)));
  for (int l = 0; l < c.num_layers; ++l) d.layers.push_back(a.layer(c, l));
  // The final norm is of the layers' kind in every architecture described (zero-centred in
  // Qwen3-Next, plain elsewhere).
  if (!d.layers.empty()) d.final_norm = d.layers.front().norm;
  if (c.mtp_module) d.input = ModelInput::kEmbeddingAndHidden;
  if (c.eagle3) d.input = ModelInput::kEagle3;
  d.hidden_state_layers = c.hidden_state_layers;
  return d;
}

ModelConfig mtp_module_config(const ModelConfig& c) {
  ModelConfig m = c;
  m.num_layers = 1;
  m.mtp_module = true;
  if (!m.linear_attention_layers.empty()) m.linear_attention_layers.assign(1, false);
  if (!m.layer_windows.empty()) m.layer_windows.assign(1, 0);
  return m;
}

}  // namespace nibble::model
