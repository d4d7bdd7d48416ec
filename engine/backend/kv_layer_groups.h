#pragma once
// How a paged KV cache splits a model's attention layers into groups of blocks (vLLM's hybrid
// KV allocator's idea): every block holds the keys and values of one group's layers for
// block_size positions. A model with full-attention and sliding-window layers (gpt-oss) gets two
// groups, full then sliding, each a block table of its own (BatchItem::block_table and
// window_block_table), so the sliding group's blocks can go back to the pool once they leave
// the window. Every other model keeps one group of all its attention layers.
#include <vector>

#include "engine/model/model_description.h"

namespace nibble::backend {

struct KvLayerGroups {
  // 0: one group. Else the sliding group's window (the largest of its layers' windows).
  int sliding_window = 0;
  // Per layer of the description: whether the layer is in the sliding group, and its index
  // within its group (-1 for a layer without KV: linear attention).
  std::vector<bool> sliding;
  std::vector<int> index;
  // Layers a block holds keys and values for: the larger group's count.
  int layers_per_block = 0;
};

KvLayerGroups kv_layer_groups(const model::ModelDescription& description);

}  // namespace nibble::backend
