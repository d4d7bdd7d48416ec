// Qwen3ForCausalLM: Llama's layers with an RMSNorm over each head of q and of k before RoPE.
#include "engine/model/architectures/architecture.h"

namespace nibble::model::architectures {
namespace {

void read(const ConfigReader& r, ModelConfig&) {
  refuse_attention_bias(r);
}

LayerSpec layer(const ModelConfig& c, int) {
  LayerSpec s;
  s.attention.qk_norm = true;
  s.ffn = dense_mlp(c);
  return s;
}

}  // namespace

const Architecture kQwen3{Arch::Qwen3, "Qwen3ForCausalLM", {}, read, layer};

}  // namespace nibble::model::architectures
