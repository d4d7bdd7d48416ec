#include "engine/backend/kv_layer_groups.h"

#include <algorithm>

namespace nibble::backend {

KvLayerGroups kv_layer_groups(const model::ModelDescription& description) {
  KvLayerGroups g;
  int full = 0, windowed = 0, window = 0;
  for (const model::LayerSpec& l : description.layers) {
    if (l.mixer != model::MixerKind::kAttention) continue;
    const int w = l.attention.sliding_window;
    (w > 0 ? windowed : full) += 1;
    window = std::max(window, w);
  }
  // Two groups only where both kinds are there: a model whose every layer slides keeps all its
  // blocks (correct, as its masks read only the window).
  const bool split = full > 0 && windowed > 0;
  g.sliding_window = split ? window : 0;
  int counts[2] = {0, 0};
  for (const model::LayerSpec& l : description.layers) {
    const bool is_kv = l.mixer == model::MixerKind::kAttention;
    const bool slides = split && is_kv && l.attention.sliding_window > 0;
    g.sliding.push_back(slides);
    g.index.push_back(is_kv ? counts[slides]++ : -1);
  }
  g.layers_per_block = std::max(counts[0], counts[1]);
  return g;
}

}  // namespace nibble::backend
