// LlamaForCausalLM: RMSNorm pre-norm layers of grouped-query attention with RoPE (plain, or
// Llama 3.1's frequency scaling) and a SwiGLU MLP; no biases.
#include "engine/model/architectures/architecture.h"

namespace nibble::model::architectures {
namespace {

void read(const ConfigReader& r, ModelConfig&) {
  refuse_attention_bias(r);
}

LayerSpec layer(const ModelConfig& c, int) {
  LayerSpec s;
  s.ffn = dense_mlp(c);
  return s;
}

}  // namespace

const Architecture kLlama{Arch::Llama, "LlamaForCausalLM", {}, read, layer};

}  // namespace nibble::model::architectures
