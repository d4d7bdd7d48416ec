#include "engine/backend/state_slot_positions.h"

#include <stdexcept>

namespace nibble::backend {

std::vector<StateSlotPositions::Restore> StateSlotPositions::prepare(
    const std::string& backend, std::span<const BatchItem> items) {
  // Every item first, so that a refused step changes nothing.
  for (const BatchItem& item : items) {
    if (item.state_slot < 0 || item.start == 0) continue;
    const Slot& at = at_[std::size_t(item.state_slot)];
    const int first = at.verify_start + 1;
    const bool snapshot = item.start >= first && item.start < first + at.count;
    if (item.start == at.live || snapshot) continue;
    std::string kept = "none";
    if (at.count > 0) kept = std::to_string(first) + ".." + std::to_string(first + at.count - 1);
    throw std::logic_error(backend + " backend: state slot " + std::to_string(item.state_slot) +
                           " is at position " + std::to_string(at.live) +
                           " with states kept at positions " + kept +
                           "; a step cannot start it at position " + std::to_string(item.start));
  }
  std::vector<Restore> restores;
  for (const BatchItem& item : items) {
    if (item.state_slot < 0 || item.start == 0) continue;
    Slot& at = at_[std::size_t(item.state_slot)];
    if (item.start == at.live) continue;
    restores.push_back({item.state_slot, item.start - at.verify_start - 1});
    at.live = item.start;
  }
  return restores;
}

void StateSlotPositions::advance(std::span<const BatchItem> items) {
  for (const BatchItem& item : items) {
    if (item.state_slot < 0) continue;
    Slot& at = at_[std::size_t(item.state_slot)];
    at.live = item.start + int(item.tokens.size());
    at.verify_start = item.start;
    at.count = keeps_states(item) ? int(item.tokens.size()) : 0;
  }
}

}  // namespace nibble::backend
