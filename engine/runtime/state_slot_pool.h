#pragma once
// Owns the recurrent-state slots of a hybrid model (Qwen3-Next's Gated DeltaNet layers; a
// Mamba2 state would live the same way): every running sequence holds one slot, whose index
// tells the backend where that sequence's conv windows and delta-rule states are. A slot is
// taken at admission and given back when the sequence finishes, is aborted or is preempted.
// The backend starts a slot's state from zeros whenever a sequence computes from position 0
// (a new or a preempted-and-recomputed sequence), so a freed slot needs no clearing here.
// Check, then act, as KvBlockPool: can_allocate before allocate.
#include <vector>

#include "engine/runtime/sequence.h"

namespace nibble::runtime {

class StateSlotPool {
 public:
  explicit StateSlotPool(int num_slots);  // >= 1

  int num_slots() const { return int(free_.size()) + used_; }
  int num_free() const { return int(free_.size()); }
  double usage() const { return double(used_) / double(num_slots()); }

  bool can_allocate() const { return !free_.empty(); }
  // Gives `seq` a slot (Sequence::state_slot); it must hold none.
  void allocate(Sequence& seq);
  // Takes the sequence's slot back, if it holds one (state_slot becomes -1).
  void free(Sequence& seq);

 private:
  std::vector<int> free_;  // back: the next slot handed out (lowest first)
  int used_ = 0;
};

}  // namespace nibble::runtime
