#pragma once
// The tensor memory accelerator (sm_90 and later, GB10's sm_121 included): bulk copies from
// global to shared memory that one thread issues and an mbarrier counts in bytes, so a block's
// loads cost a few instructions instead of one 16-byte cp.async per thread and chunk (with its
// address arithmetic). A 2D tensor copy also applies the 128-byte swizzle that ldmatrix needs
// and fills rows and columns past the tensor's edge with zeros.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace nibble::kernels::tma {

__device__ inline void mbarrier_init(unsigned bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals));
}
// Makes the initialized barriers visible to the copy engine before any copy names them.
__device__ inline void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// The one arrival of this phase, announcing how many bytes its copies will deliver.
__device__ inline void mbarrier_arrive_expect_bytes(unsigned bar, unsigned bytes) {
  asm volatile(
      "{\n .reg .b64 state;\n mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::
          "r"(bar),
      "r"(bytes)
      : "memory");
}
// Waits until the phase with this parity has completed (every byte announced has landed). The
// retry loop lives inside the asm block: as a C++ loop it made ptxas spill accumulators of the
// 128-row tile around it on sm_120a.
__device__ inline void mbarrier_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n .reg .pred done;\n"
      "retry:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra retry;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// bytes (a multiple of 16, both addresses 16-byte aligned) from global to shared memory.
__device__ inline void copy_bytes(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}
// The box of a 2D tensor map whose first element is (inner, outer).
__device__ inline void copy_box_2d(unsigned dst, const CUtensorMap* map, int inner, int outer,
                                   unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(inner), "r"(outer), "r"(bar)
      : "memory");
}

// Row-major BF16 matrix [rows, cols] read in boxes of box_rows x 64 columns (128 bytes a row,
// 128-byte swizzle: 16-byte chunk c of row r lands at chunk c ^ (r % 8) of a 1024-byte aligned
// box). Needs a 16-byte aligned base and cols % 8 == 0; returns the driver's refusal otherwise.
inline cudaError_t encode_bf16_rows_map(CUtensorMap* map, const void* base, std::int64_t rows,
                                        std::int64_t cols, int box_rows) {
  // The driver entry point, looked up once; the runtime library needs no -lcuda for it.
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      fn = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  if (encode == nullptr) return cudaErrorNotSupported;
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(cols) * 2};
  const cuuint32_t box[2] = {64, cuuint32_t(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r =
      encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box,
             element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// encode_bf16_rows_map with box_rows = BoxRows, the last map per thread reused while base, rows
// and cols stay the same (prefill calls the same x for several layers in a row: q/k/v, gate/up).
template <int BoxRows>
inline cudaError_t cached_bf16_rows_map(CUtensorMap* map, const void* base, std::int64_t rows,
                                        std::int64_t cols) {
  struct Last {
    const void* base = nullptr;
    std::int64_t rows = 0, cols = 0;
    CUtensorMap map{};
  };
  thread_local Last last;
  if (last.base != base || last.rows != rows || last.cols != cols) {
    const cudaError_t err = encode_bf16_rows_map(&last.map, base, rows, cols, BoxRows);
    if (err != cudaSuccess) {
      last.base = nullptr;
      return err;
    }
    last.base = base, last.rows = rows, last.cols = cols;
  }
  *map = last.map;
  return cudaSuccess;
}

}  // namespace nibble::kernels::tma
