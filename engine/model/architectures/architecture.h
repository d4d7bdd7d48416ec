#pragma once
// One entry per architecture Nibble runs: the name config.json gives it, the fields only it
// reads, and what its layers compute (model_description.h). The common fields (sizes, heads,
// RoPE, norms' epsilon) are read for every architecture by model_config.cpp first.
#include <span>
#include <string_view>

#include "engine/model/config_reader.h"
#include "engine/model/model_config.h"
#include "engine/model/model_description.h"

namespace nibble::model {

// A key transformers' config class declares in `attribute_map`: config.json may carry either
// spelling.
struct KeyAlias {
  const char* key;    // the name the reader uses
  const char* alias;  // the name transformers may write instead
};

struct Architecture {
  Arch arch;
  const char* hf_name;  // config.json's architectures[0], e.g. "Qwen3ForCausalLM"
  std::span<const KeyAlias> aliases;
  // Reads the architecture's own fields into `config` (after the common ones); throws ModelError
  // through the reader for values it cannot run.
  void (*read_config)(const ConfigReader& reader, ModelConfig& config);
  // What layer `layer` of a model of this architecture computes.
  LayerSpec (*layer)(const ModelConfig& config, int layer);
};

std::span<const Architecture* const> supported_architectures();
const Architecture* find_architecture(std::string_view hf_name);  // nullptr: not supported
const Architecture& architecture_of(Arch arch);

// The refusal every architecture without attention biases gives a config that asks for them.
void refuse_attention_bias(const ConfigReader& reader);
// The dense SwiGLU MLP of `config`'s intermediate size.
FfnSpec dense_mlp(const ModelConfig& config);

namespace architectures {
extern const Architecture kLlama, kMistral, kQwen2, kQwen3, kQwen3Moe, kGptOss, kQwen3Next;
// EAGLE-3 draft heads, under both names their checkpoints use (llama_eagle3.cpp).
extern const Architecture kLlamaEagle3, kEagle3Llama;
}  // namespace architectures

}  // namespace nibble::model
