// Qwen2ForCausalLM: Llama's layers with biases on the q, k and v projections.
#include "engine/model/architectures/architecture.h"

namespace nibble::model::architectures {
namespace {

void read(const ConfigReader&, ModelConfig&) {}  // attention_bias is implied: always biased

LayerSpec layer(const ModelConfig& c, int l) {
  LayerSpec s = kLlama.layer(c, l);
  s.attention.qkv_bias = true;
  return s;
}

}  // namespace

const Architecture kQwen2{Arch::Qwen2, "Qwen2ForCausalLM", {}, read, layer};

}  // namespace nibble::model::architectures
