#include "engine/spec/draft_slots.h"

#include <algorithm>
#include <string>

#include "engine/spec/speculative_config.h"

namespace nibble::spec {

DraftSlots make_draft_slots(backend::Backend& backend, std::string_view method, int max_sequences,
                            int max_tokens_per_sequence, int block_size, int max_chunk_tokens) {
  if (max_sequences < 1 || max_tokens_per_sequence < 1 || block_size < 1 || max_chunk_tokens < 1)
    throw SpeculativeConfigError(
        "--speculative-config: " + std::string(method) +
        ": max_sequences, max_tokens_per_sequence, block_size and max_chunk_tokens must be at "
        "least 1");
  DraftSlots s;
  s.capacity = std::min(max_tokens_per_sequence, backend.config().max_context);
  const int blocks_per_slot = (s.capacity + block_size - 1) / block_size;
  s.cache = backend.new_kv_cache(blocks_per_slot * max_sequences, block_size);
  s.bytes = backend.kv_block_bytes(block_size) * std::size_t(blocks_per_slot) *
            std::size_t(max_sequences);
  s.block_tables.resize(std::size_t(max_sequences));
  for (int slot = 0; slot < max_sequences; ++slot)
    for (int b = 0; b < blocks_per_slot; ++b)
      s.block_tables[std::size_t(slot)].push_back(slot * blocks_per_slot + b);
  return s;
}

}  // namespace nibble::spec
