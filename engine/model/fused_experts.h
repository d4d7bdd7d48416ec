#pragma once
// gpt-oss's experts (ExpertLayout::kFusedInterleaved, model_description.h) as one Linear pair
// per expert. The checkpoint holds every expert of a layer in one tensor per projection, under
// `prefix` (model.layers.N.mlp.experts):
//   MXFP4 (as shipped):  gate_up_proj_blocks U8 [E, 2I, H/32, 16], gate_up_proj_scales U8
//                        [E, 2I, H/32]; down_proj_blocks U8 [E, H, I/32, 16], down_proj_scales
//                        U8 [E, H, I/32]: rows are outputs, as our [out, in]; kept as MXFP4
//   BF16 (transformers): gate_up_proj [E, H, 2I], down_proj [E, I, H]: [in, out], transposed here
//   both:                gate_up_proj_bias [E, 2I], down_proj_bias [E, H]
// gate_up's outputs alternate gate and up (row 2j is gate j, row 2j+1 up j), kept in that order.
#include <string>
#include <vector>

#include "engine/model/model_weights.h"
#include "engine/model/safetensors.h"

namespace nibble::model {

// Throws ModelError naming the tensor for a missing tensor, a wrong shape or dtype, or MXFP4
// blocks in a checkpoint whose quantization_config does not declare mxfp4.
std::vector<ExpertWeights> load_fused_experts(const Checkpoint& ck, QuantFormat format,
                                              const std::string& prefix, int experts,
                                              std::int64_t intermediate, std::int64_t hidden);

}  // namespace nibble::model
