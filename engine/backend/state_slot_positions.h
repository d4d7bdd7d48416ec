#pragma once
// Where each recurrent-state slot of a hybrid model's cache stands (BatchItem::state_slot), and
// speculative decoding's rollback rule, shared by the CPU and CUDA backends: a slot's live state
// covers positions [0, live); a verify item (several tokens, logits at several positions) also
// leaves snapshots, snapshot j covering [0, verify_start + 1 + j) for j < count. The slot's next
// item starts at 0 (a fresh state), at live, or at a snapshot's position, whose state then
// replaces the live one: rejected drafts leave no trace. Backends keep the states; this keeps
// the positions.
#include <span>
#include <string>
#include <vector>

#include "engine/backend/backend.h"

namespace nibble::backend {

class StateSlotPositions {
 public:
  explicit StateSlotPositions(int slots) : at_(std::size_t(slots)) {}

  // Whether `item` is a verify step whose state after each token is kept.
  static bool keeps_states(const BatchItem& item) {
    return item.tokens.size() > 1 && item.num_logits > 1;
  }

  // A slot whose live state must be replaced by one of its snapshots before the step.
  struct Restore {
    int slot = 0, snapshot = 0;
  };
  // Before a step: checks every item of a state slot (start 0, live, or a snapshot's position),
  // throwing std::logic_error that names `backend`, the slot and its positions before changing
  // anything; then returns the restores the step needs and records them (the slot is live at the
  // item's start).
  std::vector<Restore> prepare(const std::string& backend, std::span<const BatchItem> items);
  // After the step is enqueued: each item's slot is live at start + tokens; a verify item's
  // snapshots cover start + 1 .. start + tokens, any other item's slot has none.
  void advance(std::span<const BatchItem> items);

  int live(int slot) const { return at_[std::size_t(slot)].live; }
  int verify_start(int slot) const { return at_[std::size_t(slot)].verify_start; }
  int snapshots(int slot) const { return at_[std::size_t(slot)].count; }

 private:
  struct Slot {
    int live = -1;         // -1: never run
    int verify_start = 0;  // the last verify item's start
    int count = 0;         // its tokens (snapshots kept); 0 after any other item
  };
  std::vector<Slot> at_;
};

}  // namespace nibble::backend
