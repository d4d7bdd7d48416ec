#include "engine/model/quantize_on_load.h"

namespace nibble::model {
namespace {

bool quantize(Linear& l) {
  if (l.quantized || l.dense.empty() || l.in_features % nvfp4::kBlockSize != 0) return false;
  l.fp4 = nvfp4::quantize_matrix(l.dense, l.out_features, l.in_features);
  l.quantized = true;
  l.dense = {};
  return true;
}

}  // namespace

int quantize_weights_nvfp4(ModelWeights& weights) {
  int count = 0;
  for (auto& layer : weights.layers) {
    LinearAttentionWeights& la = layer.linear_attention;
    for (Linear* l : {&layer.q, &layer.k, &layer.v, &layer.o, &layer.gate, &layer.up, &layer.down,
                      &la.in_proj_qkvz, &la.in_proj_ba, &la.out_proj, &layer.shared_gate,
                      &layer.shared_up, &layer.shared_down})
      count += quantize(*l);
    for (auto& e : layer.experts)
      for (Linear* l : {&e.gate, &e.up, &e.down, &e.gate_up}) count += quantize(*l);
  }
  return count;
}

}  // namespace nibble::model
