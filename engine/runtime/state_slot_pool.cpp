#include "engine/runtime/state_slot_pool.h"

#include <stdexcept>

namespace nibble::runtime {

StateSlotPool::StateSlotPool(int num_slots) {
  if (num_slots < 1) throw std::invalid_argument("a state slot pool needs at least one slot");
  for (int s = num_slots - 1; s >= 0; --s) free_.push_back(s);
}

void StateSlotPool::allocate(Sequence& seq) {
  if (seq.state_slot >= 0)
    throw std::logic_error("sequence " + std::to_string(seq.id) + " already holds state slot " +
                           std::to_string(seq.state_slot));
  if (free_.empty()) throw std::logic_error("no free state slot (ask can_allocate first)");
  seq.state_slot = free_.back();
  free_.pop_back();
  ++used_;
}

void StateSlotPool::free(Sequence& seq) {
  if (seq.state_slot < 0) return;
  free_.push_back(seq.state_slot);
  seq.state_slot = -1;
  --used_;
}

}  // namespace nibble::runtime
