#include "engine/backend/cpu/cpu_kv_cache.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace nibble::backend::cpu {

void CpuKvCache::prepare_state_slots(std::span<const BatchItem> items) {
  // Check every item first, so a refused step changes no slot.
  for (const BatchItem& item : items) {
    if (item.state_slot < 0 || item.start == 0) continue;
    const SlotPositions& at = positions_[std::size_t(item.state_slot)];
    const bool kept_here = item.start >= at.first_kept && item.start < at.first_kept + at.num_kept;
    if (item.start == at.live || kept_here) continue;
    std::string kept = "none";
    if (at.num_kept > 0)
      kept = std::to_string(at.first_kept) + ".." + std::to_string(at.first_kept + at.num_kept - 1);
    throw std::logic_error("cpu backend: state slot " + std::to_string(item.state_slot) +
                           " is at position " + std::to_string(at.live) +
                           " with states kept at positions " + kept +
                           "; a step cannot start it at position " + std::to_string(item.start));
  }
  for (const BatchItem& item : items) {
    if (item.state_slot < 0) continue;
    const std::size_t s = std::size_t(item.state_slot);
    SlotPositions& at = positions_[s];
    if (item.start != 0 && item.start != at.live) {  // roll back to the kept state
      const int j = item.start - at.first_kept;
      for (std::size_t l = 0; l < conv.size(); ++l) {
        if (conv[l].empty()) continue;
        const std::span<float> c = kept_conv_state(int(l), item.state_slot, j);
        const std::span<float> d = kept_delta_state(int(l), item.state_slot, j);
        std::copy(c.begin(), c.end(), conv_state(int(l), item.state_slot).begin());
        std::copy(d.begin(), d.end(), delta_state(int(l), item.state_slot).begin());
      }
      at.live = item.start;
    }
    if (!keeps_states(item)) continue;
    KeptStates& kept = kept_[s];
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
  for (const BatchItem& item : items) {
    if (item.state_slot < 0) continue;
    SlotPositions& at = positions_[std::size_t(item.state_slot)];
    at.live = item.start + int(item.tokens.size());
    at.first_kept = item.start + 1;
    at.num_kept = keeps_states(item) ? int(item.tokens.size()) : 0;
  }
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
