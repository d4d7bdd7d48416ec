#include "kernels/nvfp4/even_spread.h"

#include <algorithm>
#include <utility>

namespace nibble::kernels {

cudaError_t current_smem_budget(SmemBudget* budget) {
  thread_local int cached_device = -1;
  thread_local SmemBudget cached;
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess || device == cached_device) {
    *budget = cached;
    return err;
  }
  SmemBudget b;
  const std::pair<int*, cudaDeviceAttr> attributes[] = {
      {&b.sms, cudaDevAttrMultiProcessorCount},
      {&b.per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor},
      {&b.per_block_max, cudaDevAttrMaxSharedMemoryPerBlockOptin},
      {&b.reserved_per_block, cudaDevAttrReservedSharedMemoryPerBlock}};
  for (const auto& [value, attribute] : attributes) {
    if ((err = cudaDeviceGetAttribute(value, attribute, device)) != cudaSuccess) return err;
  }
  b.per_block_max -= 1024;  // room for a kernel's static shared memory
  cached = b;
  cached_device = device;
  *budget = b;
  return cudaSuccess;
}

int even_spread_smem(int needed, std::int64_t blocks, const SmemBudget& sm) {
  if (sm.sms <= 0 || sm.per_sm <= 0 || blocks <= 0) return needed;
  const std::int64_t per_sm = (blocks + sm.sms - 1) / sm.sms;
  // The least that keeps per_sm + 1 blocks off one SM, in 128-byte steps.
  const std::int64_t spread = (sm.per_sm / (per_sm + 1) - sm.reserved_per_block + 128) / 128 * 128;
  if (spread <= needed || spread > sm.per_block_max ||
      per_sm * (spread + sm.reserved_per_block) > sm.per_sm) {
    return needed;
  }
  return int(spread);
}

cudaError_t allow_all_block_smem(const void* kernel) {
  SmemBudget sm;
  cudaError_t err = current_smem_budget(&sm);
  if (err != cudaSuccess) return err;
  // Static and dynamic shared memory together may not pass the opt-in limit: a kernel with more
  // than the 1 KB of static memory the budget leaves (the MoE kernels that route in their
  // blocks) gets less.
  cudaFuncAttributes attributes{};
  if ((err = cudaFuncGetAttributes(&attributes, kernel)) != cudaSuccess) return err;
  const int most = sm.per_block_max + 1024 - int(attributes.sharedSizeBytes);
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              std::min(sm.per_block_max, most));
}

cudaError_t launch_smem(int needed, std::int64_t blocks, bool overlap, int* smem) {
  *smem = needed;
  if (!overlap) return cudaSuccess;
  SmemBudget sm;
  const cudaError_t err = current_smem_budget(&sm);
  if (err == cudaSuccess) *smem = even_spread_smem(needed, blocks, sm);
  return err;
}

}  // namespace nibble::kernels
