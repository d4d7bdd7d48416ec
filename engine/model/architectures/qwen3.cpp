// Qwen3ForCausalLM: Llama's layers with an RMSNorm over each head of q and of k before RoPE.
#include "engine/model/architectures/architecture.h"

namespace nibble::model::architectures {
namespace {

void read(const ConfigReader& r, ModelConfig&) {
  refuse_attention_bias(r);
}

LayerSpec layer(const ModelConfig& c, int l) {
  LayerSpec s = kLlama.layer(c, l);
  s.attention.qk_norm = true;
  return s;
}

}  // namespace

const Architecture kQwen3{Arch::Qwen3, "Qwen3ForCausalLM", {}, read, layer};

}  // namespace nibble::model::architectures
