#pragma once
// One generation stream: its tokens, how many of them have KV in the cache, and which
// cache blocks hold them. Owned by the engine; the scheduler and the block pool update it.
#include <cstdint>
#include <vector>

#include "engine/runtime/sampling_params.h"

namespace nibble::runtime {

enum class SequenceStatus { kWaiting, kRunning, kFinished };

struct Sequence {
  std::int64_t id = 0;
  std::vector<int> tokens;  // prompt, then generated tokens
  int num_prompt_tokens = 0;
  SamplingParams params;
  SequenceStatus status = SequenceStatus::kWaiting;

  // KV state. Tokens [0, num_computed_tokens) have their keys and values in the cache.
  int num_computed_tokens = 0;
  std::vector<int> block_table;  // cache block ids, block i holds tokens [16i, 16i+16)
  // Sliding-window models: the sliding layers' blocks, block i for the same tokens; entries of
  // blocks that left the window are kFreedBlock (kv_block_pool.h). Empty for other models.
  std::vector<int> window_block_table;
  // Chained hashes of the leading full blocks registered with the prefix cache.
  std::vector<std::uint64_t> block_hashes;
  // Hybrid models: the recurrent-state slot the sequence holds while it runs (StateSlotPool),
  // -1 while it holds none.
  int state_slot = -1;
  int num_cached_prompt_tokens = 0;  // served from the prefix cache at the last admission
  int num_preemptions = 0;
  // Speculative decoding: tokens a drafter proposed to follow `tokens`, set before a step and
  // verified by it (computed after the last token, at positions num_tokens() onwards). Never part
  // of `tokens` until accepted; cleared when the step completes or the sequence is preempted.
  std::vector<int> draft_tokens;

  int num_tokens() const { return int(tokens.size()); }
  int num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  // Token at position pos of the step's input: tokens, then the drafts.
  int token_at(int pos) const {
    return pos < num_tokens() ? tokens[std::size_t(pos)]
                              : draft_tokens[std::size_t(pos - num_tokens())];
  }
};

}  // namespace nibble::runtime
