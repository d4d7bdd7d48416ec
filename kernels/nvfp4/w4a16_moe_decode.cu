// One launch for a single token's routed experts (decode, T = 1; w4a16_grouped.h
// w4a16_grouped_experts_routed). Block (x, r) routes the token from the router's logits, takes
// gate_up slice x of pick row r (the routed gate_up's block, while x < n / 32) and then down slice
// x of the same pick (the routed down's block, the weighted combine included). A down slice needs
// the whole SiLU product of its pick, so it waits for that pick's gate_up slices through a counter
// in global memory, not for a whole grid: no second launch, no drain of the gate_up grid before
// any down block can start, and the blocks ask the L2 for their down weights as soon as their
// gate_up weights are requested. The bodies are the two routed launches' (gate_up_silu_block and
// down_combine_block, same shapes, same sums): the same output bits.
// Blocks wait on one another, so all of them must be resident at once: the launch checks the
// occupancy and answers cudaErrorNotSupported where they would not be (the caller then takes the
// two launches).
#include <type_traits>

#include "kernels/l2_prefetch.cuh"
#include "kernels/nvfp4/w4a16_slice_down_combine.cuh"
#include "kernels/nvfp4/w4a16_slice_gate_up_silu.cuh"

namespace nibble::kernels {
namespace {

using GateUpShape = SliceGateUpSilu;
using DownShape = SliceDownCombine;
constexpr int kThreads = GateUpShape::kThreads;
static_assert(DownShape::kThreads == kThreads, "one block runs both slices");
// Qwen3-30B-A3B: 64 x 8 = 512 blocks, 4 an SM on 132 SMs (40 KB of shared memory each).
constexpr int kMinBlocks = 4;
// Rows of x the rings are laid out for: the one routed row.
constexpr int kRows = 1;

// -DNIBBLE_MOE_TIMELINE=ON (dev builds): thread 0 of each block records %globaltimer at each
// phase, and the SM, for w4a16_moe_decode_timeline.
#if NIBBLE_MOE_TIMELINE
constexpr int kTimelineBlocks = 4096;
__device__ unsigned long long g_timeline[kTimelineBlocks][MoeDecodeTimeline::kPoints + 1];
#endif
thread_local int g_timeline_grid[3] = {};  // slices, rows, gate_slices of this thread's last launch
__device__ inline void mark([[maybe_unused]] MoeDecodeTimeline::Point point) {
#if NIBBLE_MOE_TIMELINE
  if (threadIdx.x != 0) return;
  const unsigned block = blockIdx.y * gridDim.x + blockIdx.x;
  if (block >= kTimelineBlocks) return;
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(now));
  g_timeline[block][point] = now;
  if (point == MoeDecodeTimeline::kEntry) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;\n" : "=r"(sm));
    g_timeline[block][MoeDecodeTimeline::kPoints] = sm;
  }
#endif
}

// The gate_up slice's hooks: the kernel waited for the router before routing; once the gate_up's
// weights are requested, the block asks the L2 for its down slice's codes and scales (one
// request per k step each), which the down's ring then finds there.
struct GateUpHooks {
  const W4A16DeviceWeight* down;  // the pick's down weight
  W4A16Strides strides;
  std::int64_t tiles_k;
  unsigned slice;
  __device__ void weights_requested() const {
    const std::int64_t n0 = std::int64_t(slice) * DownShape::kRows;
    const std::int64_t group = (n0 / 128) * strides.group;
    const int tile0 = int(n0 % 128) / 8;
    for (std::int64_t kt = threadIdx.x; kt < tiles_k; kt += kThreads) {
      const std::int64_t step = group + kt * strides.kt;
      prefetch_to_l2(down->tiles + step * 4096 + tile0 * 256, DownShape::kCodeBytes);
      prefetch_to_l2(down->scales + step * 512 + tile0 * 32, DownShape::kScaleBytes);
    }
  }
  __device__ void wait() const {}
  __device__ void allow() const {}
};

// The down slice's hooks: its weights are requested first; then thread 0 waits until every
// gate_up slice of the pick has published its SiLU product (release by the writers: fence, then
// the count), and the block barrier passes that on before any thread reads the product.
struct DownHooks {
  const std::int32_t* done;
  int needed;
  __device__ void weights_requested() const {}
  __device__ void wait() const {
    if (threadIdx.x == 0) {
      int seen;
      for (;;) {
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(seen) : "l"(done) : "memory");
        if (seen >= needed) break;
        __nanosleep(32);
      }
    }
    mark(MoeDecodeTimeline::kDownWaitPassed);
    __syncthreads();
  }
  __device__ void allow() const {}
};

// Grid (down slices, k). gate_done: [k] gate_up slices done per pick row, then [k] blocks past
// their wait per pick row; zeros on entry, left zero (the last block of a row past its wait
// clears both).
// F: the experts' weight format (the shapes' scale decode; sizes are the same in both); CLAMPED:
// gpt-oss's experts (W4A16GroupedCombine::clamped_swiglu).
template <class S, nvfp4::W4A16Format F, bool CLAMPED>
using ExpertShape = std::conditional_t<
    CLAMPED,
    SliceClampedSwiglu<std::conditional_t<F == nvfp4::W4A16Format::kMxfp4, SliceMxfp4<S>, S>>,
    std::conditional_t<F == nvfp4::W4A16Format::kMxfp4, SliceMxfp4<S>, S>>;
template <nvfp4::W4A16Format F, bool CLAMPED>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    w4a16_moe_decode_kernel(const std::uint16_t* __restrict__ x, W4A16GroupedWeights gate_up,
                            W4A16GroupedWeights down, W4A16GroupedCombine combine,
                            std::uint16_t* __restrict__ middle,
                            std::uint16_t* __restrict__ expert_out,
                            std::int32_t* __restrict__ gate_done, W4A16Strides gate_strides,
                            W4A16Strides down_strides) {
  mark(MoeDecodeTimeline::kEntry);
  wait_for_previous_grid();  // the router's logits
  mark(MoeDecodeTimeline::kWaited);
  // Every block of this grid is resident once all have passed here, so the next kernel's blocks
  // may take the room left (the waits below never depend on a block that is not yet running).
  allow_next_grid();
  const W4A16GroupedRoute& route = combine.route;
  __shared__ moe_device::SingleTokenRoute route_s;
  moe_device::route_single_token(
      route.logits, route.experts, route.k, route.scoring, route_s, [](int phase) {
        mark(phase == 0 ? MoeDecodeTimeline::kProbabilities : MoeDecodeTimeline::kRanked);
      });
  if (blockIdx.x == 0 && blockIdx.y == 0)
    moe_device::write_single_token_route(route_s, route.experts, route.k, route.out);
  mark(MoeDecodeTimeline::kRouted);
  W4A16GroupedCombine fuse = combine;
  fuse.token = route_s.token;
  fuse.source = route_s.source;
  fuse.weight = route_s.weight;
  fuse.k = route.k;
  const unsigned row = blockIdx.y;
  const W4A16DeviceWeight& g = gate_up.shape;
  const W4A16DeviceWeight& d = down.shape;
  const unsigned gate_slices = unsigned(g.n / 32);  // 16 gate and 16 up rows a slice
  if (blockIdx.x < gate_slices) {
    const GateUpHooks hooks{down.table + route_s.blocks[row].expert, down_strides, d.k_padded / 64,
                            blockIdx.x};
    using G = ExpertShape<GateUpShape, F, CLAMPED>;
    gate_up_silu_block<G, 1, false>(x, kRows, g.n, g.k, g.tiles, g.scales, g.k_padded / 64,
                                    gate_strides, 1.0f, middle, route_s.blocks, gate_up.table, fuse,
                                    SlicePlace{blockIdx.x, row, gate_slices}, hooks);
    mark(MoeDecodeTimeline::kGateUpDone);
    __threadfence();  // this block's share of the product, before its count
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(gate_done + row, 1);
  }
  __syncthreads();  // the gate_up's sums have left the shared memory the down's ring takes
  using D = ExpertShape<DownShape, F, CLAMPED>;
  down_combine_block<D, 1, false>(middle, kRows, d.n, d.k, d.tiles, d.scales, d.k_padded / 64,
                                  down_strides, 1.0f, nullptr, expert_out, route_s.blocks,
                                  down.table, fuse, SlicePlace{blockIdx.x, row, gridDim.x},
                                  DownHooks{gate_done + row, int(gate_slices)});
  mark(MoeDecodeTimeline::kDownDone);
  if (threadIdx.x == 0 && atomicAdd(gate_done + route.k + row, 1) == int(gridDim.x) - 1) {
    gate_done[row] = 0;
    gate_done[route.k + row] = 0;
  }
}

int one_launch_smem() {
  const int gate = smem_bytes<GateUpShape>(kRows), down = smem_bytes<DownShape>(kRows);
  return gate > down ? gate : down;
}
static_assert(smem_bytes<DownShape>(kRows) >= DownShape::kWarps * DownShape::kPairs * 4 * 32 * 4 &&
                  smem_bytes<GateUpShape>(kRows) >=
                      GateUpShape::kWarps * GateUpShape::kPairs * 4 * 32 * 4,
              "the sums fit in the rings");

// Every form of the kernel (weight format x activation), indexed [mxfp4][clamped].
using DecodeKernel = decltype(&w4a16_moe_decode_kernel<nvfp4::W4A16Format::kNvfp4, false>);
const DecodeKernel kDecodeKernels[2][2] = {
    {w4a16_moe_decode_kernel<nvfp4::W4A16Format::kNvfp4, false>,
     w4a16_moe_decode_kernel<nvfp4::W4A16Format::kNvfp4, true>},
    {w4a16_moe_decode_kernel<nvfp4::W4A16Format::kMxfp4, false>,
     w4a16_moe_decode_kernel<nvfp4::W4A16Format::kMxfp4, true>}};

// Blocks of `kernel` resident at once on the current device with `smem` bytes of dynamic shared
// memory each (the last answer kept per thread: one shape, form and device in practice).
cudaError_t resident_blocks(DecodeKernel kernel, int smem, int* count) {
  thread_local int asked_smem = -1, asked_device = -1, resident = 0;
  thread_local DecodeKernel asked_kernel = nullptr;
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (smem != asked_smem || device != asked_device || kernel != asked_kernel) {
    SmemBudget budget;
    int per_sm = 0;
    err = current_smem_budget(&budget);
    if (err == cudaSuccess)
      err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads,
                                                          std::size_t(smem));
    if (err != cudaSuccess) return err;
    asked_smem = smem;
    asked_device = device;
    asked_kernel = kernel;
    resident = budget.sms * per_sm;
  }
  *count = resident;
  return cudaSuccess;
}

}  // namespace

cudaError_t w4a16_moe_decode_timeline(MoeDecodeTimeline* out) {
#if NIBBLE_MOE_TIMELINE
  const int blocks = g_timeline_grid[0] * g_timeline_grid[1];
  if (blocks <= 0 || blocks > kTimelineBlocks) return cudaErrorInvalidValue;
  std::vector<unsigned long long> raw(std::size_t(blocks) * (MoeDecodeTimeline::kPoints + 1));
  cudaError_t err = cudaDeviceSynchronize();
  if (err == cudaSuccess)
    err = cudaMemcpyFromSymbol(raw.data(), g_timeline, raw.size() * sizeof(raw[0]));
  if (err != cudaSuccess) return err;
  out->slices = g_timeline_grid[0];
  out->rows = g_timeline_grid[1];
  out->gate_slices = g_timeline_grid[2];
  out->at.assign(std::size_t(blocks), {});
  out->sm.assign(std::size_t(blocks), 0);
  for (int b = 0; b < blocks; ++b) {
    const unsigned long long* r = raw.data() + std::size_t(b) * (MoeDecodeTimeline::kPoints + 1);
    for (int p = 0; p < MoeDecodeTimeline::kPoints; ++p)
      out->at[std::size_t(b)][std::size_t(p)] = r[p];
    out->sm[std::size_t(b)] = int(r[MoeDecodeTimeline::kPoints]);
  }
  return cudaSuccess;
#else
  (void)out;
  return cudaErrorNotSupported;
#endif
}

cudaError_t w4a16_grouped_experts_routed_prepare() {
  // The even spread below may ask for more shared memory than the 48 KB default.
  static const cudaError_t err = [] {
    for (const auto& forms : kDecodeKernels)
      for (const DecodeKernel kernel : forms) {
        const cudaError_t e = allow_all_block_smem(reinterpret_cast<const void*>(kernel));
        if (e != cudaSuccess) return e;
      }
    return cudaSuccess;
  }();
  return err;
}

cudaError_t w4a16_grouped_experts_routed(const std::uint16_t* x, const W4A16GroupedWeights& gate_up,
                                         const W4A16GroupedWeights& down,
                                         const W4A16GroupedCombine& combine, std::uint16_t* middle,
                                         std::uint16_t* expert_out, std::int32_t* gate_done,
                                         cudaStream_t stream, bool overlap) {
  const W4A16GroupedRoute& route = combine.route;
  const MoeRouting& o = route.out;
  const std::int64_t down_slices = down.shape.n_padded / DownShape::kRows;
  if (route.logits == nullptr || route.experts < 1 || route.experts > kMoeMaxExperts ||
      route.k < 1 || route.k > route.experts || route.k > kMoeMaxTopK || gate_up.table == nullptr ||
      down.table == nullptr || gate_up.shape.n % 32 != 0 || down.shape.k != gate_up.shape.n / 2 ||
      combine.residual == nullptr || combine.out == nullptr || combine.arrivals == nullptr ||
      gate_done == nullptr || o.expert == nullptr || o.weight == nullptr || o.counts == nullptr ||
      o.offsets == nullptr || o.token == nullptr || o.source == nullptr || o.blocks == nullptr ||
      down_slices != w4a16_grouped_combine_slices(down.shape.n))
    return cudaErrorInvalidValue;
  // Every gate_up slice needs a block (one per down slice).
  if (gate_up.shape.n / 32 > down_slices) return cudaErrorNotSupported;
  if (gate_up.shape.format != down.shape.format) return cudaErrorInvalidValue;
  const DecodeKernel kernel =
      kDecodeKernels[gate_up.shape.format == nvfp4::W4A16Format::kMxfp4][combine.clamped_swiglu];
  cudaError_t err = w4a16_grouped_experts_routed_prepare();
  if (err != cudaSuccess) return err;
  // Under the dependent launch the blocks land wherever there is room as the router's leave:
  // shared memory for an even spread keeps them off a crowded few SMs (even_spread.h).
  const std::int64_t blocks = down_slices * route.k;
  int smem = 0, resident = 0;
  if ((err = launch_smem(one_launch_smem(), blocks, overlap, &smem)) != cudaSuccess ||
      (err = resident_blocks(kernel, smem, &resident)) != cudaSuccess)
    return err;
  if (blocks > resident) return cudaErrorNotSupported;
  g_timeline_grid[0] = int(down_slices);
  g_timeline_grid[1] = route.k;
  g_timeline_grid[2] = int(gate_up.shape.n / 32);
  LaunchWithOverlap launch(dim3(unsigned(down_slices), unsigned(route.k)), kThreads, smem, stream,
                           overlap);
  const cudaError_t launched =
      cudaLaunchKernelEx(&launch.config, kernel, x, gate_up, down, combine, middle, expert_out,
                         gate_done, w4a16_strides(gate_up.shape), w4a16_strides(down.shape));
  return launched != cudaSuccess ? launched : cudaGetLastError();
}

}  // namespace nibble::kernels
