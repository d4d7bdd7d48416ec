#pragma once
// The cache row of a sequence's key through its block table (PagedAttentionArgs::block_tables),
// shared by the flash and decode kernels. block_shift() (flash_prefill.h) gives the shift for
// power-of-two block sizes under kFlashShiftSlots: a shift and a mask instead of a division by a
// block size known only at run time (~20 instructions per lookup).
#include <cstdint>

namespace nibble::kernels::detail {

// bs_shift >= 0: block_size == 1 << bs_shift; < 0: divide.
__device__ __forceinline__ std::int64_t cache_slot(const std::int32_t* table, int block_size,
                                                   int key, int bs_shift) {
  if (bs_shift >= 0)
    return (std::int64_t(table[key >> bs_shift]) << bs_shift) + (key & (block_size - 1));
  return std::int64_t(table[key / block_size]) * block_size + key % block_size;
}

}  // namespace nibble::kernels::detail
