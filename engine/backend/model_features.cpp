#include "engine/backend/model_features.h"

#include "engine/backend/backend.h"

namespace nibble::backend {

std::vector<std::string> features_beyond_baseline(const model::ModelWeights& model,
                                                  const model::ModelDescription& description) {
  bool o_bias = false, sinks = false, window = false, topk_softmax = false, router_bias = false,
       expert_bias = false, clamped = false, fused = false, zero_centred = false, deltanet = false,
       output_gate = false, shared_expert = false;
  for (const model::LayerSpec& l : description.layers) {
    zero_centred |= l.norm != model::NormKind::kRms;
    deltanet |= l.mixer == model::MixerKind::kGatedDeltaNet;
    output_gate |= l.attention.output_gate;
    o_bias |= l.attention.o_bias;
    sinks |= l.attention.sinks;
    window |= l.attention.sliding_window > 0;
    if (l.ffn.kind != model::FfnKind::kMoe) continue;
    const model::MoeSpec& m = l.ffn.moe;
    topk_softmax |= m.routing != model::MoeRouting::kSoftmaxTopK;
    router_bias |= m.router_bias;
    expert_bias |= m.expert_bias;
    clamped |= m.activation != model::ExpertActivation::kSwiGlu;
    fused |= m.layout != model::ExpertLayout::kPerExpert;
    shared_expert |= m.shared_expert_intermediate_size > 0;
  }
  bool mxfp4 = model.quant.format == model::QuantFormat::Mxfp4;
  for (const model::LayerWeights& l : model.layers)
    for (const model::ExpertWeights& e : l.experts)
      mxfp4 |= e.gate_up.is_mxfp4() || e.down.is_mxfp4();

  std::vector<std::string> used;
  const auto note = [&](bool uses, const char* name) {
    if (uses) used.emplace_back(name);
  };
  note(description.input == model::ModelInput::kEmbeddingAndHidden,
       "a multi-token-prediction module's input (mtp)");
  note(description.input == model::ModelInput::kEagle3, "an EAGLE-3 head's input (eagle3)");
  note(!description.hidden_state_layers.empty(),
       "inner layers' hidden states for an EAGLE-3 head (eagle3)");
  note(deltanet, "Gated DeltaNet linear attention");
  note(output_gate, "gated attention output");
  note(zero_centred, "zero-centred RMSNorm");
  note(model.config.rope_dim() != model.config.head_dim, "partial RoPE");
  note(shared_expert, "a shared expert");
  note(o_bias, "an o_proj bias");
  note(sinks, "attention sinks");
  note(window, "sliding-window attention");
  note(model.config.rope.yarn, "YaRN RoPE");
  note(topk_softmax, "top-k-then-softmax routing");
  note(router_bias, "a router bias");
  note(expert_bias, "expert biases");
  note(clamped, "the clamped SwiGLU");
  note(fused, "fused interleaved gate/up experts");
  note(mxfp4, "MXFP4 weights");
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
