#pragma once
// The attention tests' check that a sliding window's kernels never read the block-table entries of
// cache blocks wholly before the window (PagedAttentionArgs::window: a sliding-window cache may
// return those blocks to the pool): such entries are set to a block id far past any allocation, so
// a kernel that reads one faults and the reference (attention_ref.h) throws.
#include "kernels/attention/attention_ref.h"

namespace nibble::gpu_test {

inline constexpr int kFreedBlock = 1 << 28;

// The entries of seq's blocks that lie wholly before its first row's window (window > 0).
inline void free_blocks_before_window(kernels::RefSequence& seq, int block_size, int window) {
  if (window <= 0) return;
  const int first = seq.start - window + 1;  // the first key any of its rows sees
  for (int b = 0; first > 0 && b < first / block_size; ++b) seq.table[std::size_t(b)] = kFreedBlock;
}

}  // namespace nibble::gpu_test
