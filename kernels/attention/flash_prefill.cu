// The flash prefill kernel's entry points and the forms the production library instantiates
// (flash_prefill.h); the kernel itself: flash_prefill_kernel.cuh.
#include "kernels/attention/flash_prefill_kernel.cuh"

namespace nibble::kernels::detail {
namespace {

// The forms the device defaults pick (device_default_options): at head_dim 128 the 64-key chunks
// with the fast softmax and lazy rescale, scored 64 keys at a time (Hopper) or in two blocks of 32
// (sm_12x); at head_dim 64 and 256 the base chunk with the fast softmax. Every other form lost its
// A/B (PERF_NOTES.md v3, v4) and lives in the dev library (flash_prefill_dev.h), reached through
// the hook it sets; without it such options answer cudaErrorNotSupported.
FlashFormLaunch dev_forms = nullptr;

template <int D, bool FP8>
cudaError_t launch_with(const PagedAttentionArgs& a, int options, int splits, bool skip_single_rows,
                        cudaStream_t stream) {
  const bool fast = (options & kFlashFastSoftmax) != 0;
  if constexpr (D == 128) {
    if ((options & kFlashChunk64) != 0 && fast && (options & kFlashLazyRescale) != 0) {
      return (options & kFlashWideScores) != 0
                 ? launch<D, FP8, 64, 64, true, true>(a, options, splits, skip_single_rows, stream)
                 : launch<D, FP8, 64, 32, true, true>(a, options, splits, skip_single_rows, stream);
    }
  } else {
    constexpr int KC = base_chunk(D);
    if (fast) return launch<D, FP8, KC, KC, true>(a, options, splits, skip_single_rows, stream);
  }
  return dev_forms != nullptr ? dev_forms(a, options, splits, skip_single_rows, stream)
                              : cudaErrorNotSupported;
}

}  // namespace

// The default form on this device: the wide scores too on Hopper, where they measured faster
// everywhere (H200, test_attention_gpu --bench, head_dim 128 causal: 32k 281.7 vs 267.7 TFLOP/s,
// 8k 266.4 vs 251.4, 2k 155.7 vs 149.1) and compile without spills; ptxas spills them on sm_12x.
static int device_default_options() {
  int device = 0, major = 0;
  const bool hopper =
      cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
      major == 9;
  // The v4 forms (lazy rescale, one barrier per chunk, mask-free body) on both: on an H200
  // (test_attention_gpu --bench; PERF_NOTES "Flash prefill v4") 127 ran 345.7 TFLOP/s at 32k
  // against 283.3 for 15, 320.5 against 266.1 at 8k, 184.4 against 154.8 at 2k. sm_12x leaves out
  // the wide scores (they spill there); 123 compiles without spills for sm_120a/121a (not measured:
  // no GB10 is lent; on the H200 123 ran within 2% of 127).
  const int v4 = kFlashLazyRescale | kFlashOneBarrier | kFlashMaskFree;
  return hopper ? kFlashDefaultOptions | kFlashWideScores | v4 : kFlashDefaultOptions | v4;
}

void set_flash_dev_forms(FlashFormLaunch launch) {
  dev_forms = launch;
}

int flash_options(const PagedAttentionArgs& a) {
  if (a.flash_options >= 0) return a.flash_options & kFlashAllOptions;
  static const int device_default = device_default_options();  // one device per process
  return device_default;
}

int block_shift(int block_size, int options) {
  if ((options & kFlashShiftSlots) == 0 || block_size <= 0 || (block_size & (block_size - 1)) != 0)
    return -1;
  int shift = 0;
  while ((1 << shift) < block_size) ++shift;
  return shift;
}

bool flash_prefill_supported(const AttentionShape& s) {
  if (s.kv_heads <= 0 || s.q_heads % s.kv_heads != 0) return false;
  const int group = s.q_heads / s.kv_heads;
  return (s.head_dim == 64 || s.head_dim == 128 || s.head_dim == 256) &&
         group <= rows_per_block(s.head_dim);
}

int flash_prefill_rows_per_tile(const AttentionShape& s) {
  return rows_per_block(s.head_dim) / (s.q_heads / s.kv_heads);
}

cudaError_t flash_prefill(const PagedAttentionArgs& a, int splits, bool skip_single_rows,
                          cudaStream_t stream) {
  const bool fp8 = a.k_cache8 != nullptr;
  const int o = flash_options(a);
  switch (a.shape.head_dim) {
    case 64:
      return fp8 ? launch_with<64, true>(a, o, splits, skip_single_rows, stream)
                 : launch_with<64, false>(a, o, splits, skip_single_rows, stream);
    case 128:
      return fp8 ? launch_with<128, true>(a, o, splits, skip_single_rows, stream)
                 : launch_with<128, false>(a, o, splits, skip_single_rows, stream);
    case 256:
      return fp8 ? launch_with<256, true>(a, o, splits, skip_single_rows, stream)
                 : launch_with<256, false>(a, o, splits, skip_single_rows, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace nibble::kernels::detail
