#include "engine/backend/cpu/cpu_kv_cache.h"

#include <algorithm>

namespace nibble::backend::cpu {

void CpuKvCache::prepare_state_slots(std::span<const BatchItem> items) {
  // Checks every item before anything changes; rolls slots back past rejected drafts.
  for (const StateSlotPositions::Restore& r : positions_.prepare("cpu", items)) {
    for (std::size_t l = 0; l < conv.size(); ++l) {
      if (conv[l].empty()) continue;
      const std::span<float> c = kept_conv_state(int(l), r.slot, r.snapshot);
      const std::span<float> d = kept_delta_state(int(l), r.slot, r.snapshot);
      std::copy(c.begin(), c.end(), conv_state(int(l), r.slot).begin());
      std::copy(d.begin(), d.end(), delta_state(int(l), r.slot).begin());
    }
  }
  for (const BatchItem& item : items) {
    if (item.state_slot < 0 || !keeps_states(item)) continue;
    KeptStates& kept = kept_[std::size_t(item.state_slot)];
    kept.conv.resize(conv.size());
    kept.delta.resize(delta.size());
    const std::size_t n = item.tokens.size();
    for (std::size_t l = 0; l < conv.size(); ++l) {
      if (conv[l].empty()) continue;
      const std::size_t conv_floats = conv[l].size() / std::size_t(slots);
      const std::size_t delta_floats = delta[l].size() / std::size_t(slots);
      if (kept.conv[l].size() < n * conv_floats) kept.conv[l].resize(n * conv_floats);
      if (kept.delta[l].size() < n * delta_floats) kept.delta[l].resize(n * delta_floats);
    }
  }
}

void CpuKvCache::advance_state_slots(std::span<const BatchItem> items) {
  positions_.advance(items);
}

std::span<float> CpuKvCache::kept_conv_state(int layer, int state_slot, int j) {
  return kept(kept_[std::size_t(state_slot)].conv[std::size_t(layer)],
              conv[std::size_t(layer)].size() / std::size_t(slots), j);
}

std::span<float> CpuKvCache::kept_delta_state(int layer, int state_slot, int j) {
  return kept(kept_[std::size_t(state_slot)].delta[std::size_t(layer)],
              delta[std::size_t(layer)].size() / std::size_t(slots), j);
}

std::size_t CpuKvCache::kept_state_bytes() const {
  std::size_t floats = 0;
  for (const KeptStates& k : kept_) {
    for (const auto& c : k.conv) floats += c.size();
    for (const auto& d : k.delta) floats += d.size();
  }
  return floats * sizeof(float);
}

}  // namespace nibble::backend::cpu
