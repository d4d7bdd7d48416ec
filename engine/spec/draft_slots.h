#pragma once
// A drafter's own KV cache cut into fixed slots, one per sequence it follows (the draft_model and
// mtp drafters): max_sequences slots of `capacity` positions each, allocated once at startup so
// that the drafter's memory is known before the target sizes its own cache; the drafters reuse a
// slot by eviction and never grow one.
#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "engine/backend/backend.h"

namespace nibble::spec {

struct DraftSlots {
  std::unique_ptr<backend::KvCache> cache;
  int capacity = 0;       // positions a slot holds: the sizes asked, capped by the model's context
  std::size_t bytes = 0;  // the whole cache's
  std::vector<std::vector<int>> block_tables;  // a slot's fixed blocks, per slot
};

// Throws SpeculativeConfigError ("--speculative-config: <method>: ...") when a size is below 1;
// max_chunk_tokens is only checked (the drafters' forward passes are cut to it).
DraftSlots make_draft_slots(backend::Backend& backend, std::string_view method, int max_sequences,
                            int max_tokens_per_sequence, int block_size, int max_chunk_tokens);

// A drafter's slots (a type with a `block_table`), each given its table from `slots`.
template <class Slot>
std::vector<Slot> slots_with_tables(const DraftSlots& slots) {
  std::vector<Slot> out(slots.block_tables.size());
  for (std::size_t s = 0; s < out.size(); ++s) out[s].block_table = slots.block_tables[s];
  return out;
}

}  // namespace nibble::spec
