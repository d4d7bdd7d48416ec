// Every flash prefill form (flash_prefill_dev.h), for the dev library.
#include "kernels/attention/flash_prefill_dev.h"

#include "kernels/attention/flash_prefill_kernel.cuh"

namespace nibble::kernels {
namespace detail {
namespace {

// The kernel form for head_dim D and the options: 64-key chunks at head_dim 128 (kFlashChunk64),
// scored 64 keys at a time (kFlashWideScores) or in two blocks of 32, the fast softmax
// (kFlashFastSoftmax) and its lazy rescale (kFlashLazyRescale).
template <int D, bool FP8>
cudaError_t launch_any(const PagedAttentionArgs& a, int options, int splits, bool skip_single_rows,
                       cudaStream_t stream) {
  constexpr int KC = base_chunk(D);
  const bool fast = (options & kFlashFastSoftmax) != 0;
  if constexpr (D == 128) {
    if ((options & kFlashChunk64) != 0) {
      const bool lazy = fast && (options & kFlashLazyRescale) != 0;
      if ((options & kFlashWideScores) != 0) {
        if (lazy)
          return launch<D, FP8, 64, 64, true, true>(a, options, splits, skip_single_rows, stream);
        return fast ? launch<D, FP8, 64, 64, true>(a, options, splits, skip_single_rows, stream)
                    : launch<D, FP8, 64, 64, false>(a, options, splits, skip_single_rows, stream);
      }
      if (lazy)
        return launch<D, FP8, 64, 32, true, true>(a, options, splits, skip_single_rows, stream);
      return fast ? launch<D, FP8, 64, 32, true>(a, options, splits, skip_single_rows, stream)
                  : launch<D, FP8, 64, 32, false>(a, options, splits, skip_single_rows, stream);
    }
  }
  return fast ? launch<D, FP8, KC, KC, true>(a, options, splits, skip_single_rows, stream)
              : launch<D, FP8, KC, KC, false>(a, options, splits, skip_single_rows, stream);
}

cudaError_t launch_any_head_dim(const PagedAttentionArgs& a, int options, int splits,
                                bool skip_single_rows, cudaStream_t stream) {
  const bool fp8 = a.k_cache8 != nullptr;
  switch (a.shape.head_dim) {
    case 64:
      return fp8 ? launch_any<64, true>(a, options, splits, skip_single_rows, stream)
                 : launch_any<64, false>(a, options, splits, skip_single_rows, stream);
    case 128:
      return fp8 ? launch_any<128, true>(a, options, splits, skip_single_rows, stream)
                 : launch_any<128, false>(a, options, splits, skip_single_rows, stream);
    case 256:
      return fp8 ? launch_any<256, true>(a, options, splits, skip_single_rows, stream)
                 : launch_any<256, false>(a, options, splits, skip_single_rows, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace
}  // namespace detail

void flash_enable_dev_forms() {
  detail::set_flash_dev_forms(detail::launch_any_head_dim);
}

}  // namespace nibble::kernels
