#pragma once
// A slice block's k loop: the prologue (each warp's first kDepth - 1 k steps in flight, the
// weights before the wait for the previous kernel, x after it), then the ring loop, each k step
// decoding the slot's weight fragments and feeding them to mma.sync with x from ldmatrix. Every
// warp accumulates its own k steps (w, w + warps, ...); w4a16_slice_epilogue.cuh adds the warps.
#include <cstdint>

#include "kernels/nvfp4/w4a16_slice_loader.cuh"

namespace nibble::kernels {
namespace {

// Per lane: [even / odd k16 step with one x fragment][x fragment][weight pair][element].
template <class S, int MT>
struct SliceAccumulators {
  // With one x fragment, two accumulators per pair (even and odd k16 steps) halve the chain of
  // dependent mma.sync; with two, the fragments' chains already interleave.
  static constexpr int kSets = MT == 1 ? 2 : 1;
  float acc[kSets][MT][S::kPairs][4];
};

// zeros: the block's 128-byte zero block, written by threads < 8 before the call (the prologue's
// barrier publishes it). order: the hooks of w4a16_slice_common.cuh.
template <class S, bool ONE_SIDE, int MT, bool GATHER, class Order>
__device__ __forceinline__ void slice_mainloop(SliceLoader<S, ONE_SIDE, MT, GATHER>& load,
                                               const SliceRing<S>& ring, int m, int steps,
                                               const std::uint8_t* zeros, const Order& order,
                                               SliceAccumulators<S, MT>& sums) {
  constexpr int kAhead = S::kDepth - 1;  // k steps in flight per warp
  constexpr int kSets = SliceAccumulators<S, MT>::kSets;
  const int lane = threadIdx.x % 32;
  const unsigned slot_size = ring.slot_size, ring_s = ring.ring_s;
  // Prologue: the weights need nothing from the previous kernel (programmatic dependent launch),
  // so they are requested before waiting for it; x after. One commit group per k step (the
  // first also holds the later steps' weights).
#pragma unroll
  for (int st = 0; st < kAhead; ++st) {
    if (st < steps) load.step_weights(ring_s + st * slot_size);
  }
  order.weights_requested();
  order.wait();
  // The next kernel may be scheduled once every block has passed here: its blocks take the SM
  // room this grid leaves and fetch their first weights during all of this kernel (releasing it
  // only once the copies are issued measured slower: PERF_NOTES, "Deleted forms").
  order.allow();
#pragma unroll
  for (int st = 0; st < kAhead; ++st) {
    if (st < steps) load.step_x(ring_s + st * slot_size);
    cp_async_commit();
  }
  __syncthreads();  // the zero block is written

  // ldmatrix: matrix i = lane / 8 is chunk 4q + i of row 8 mt + r, r = lane % 8 (the b fragments
  // of k16 steps 2q, 2q + 1); (offset at q = 0) ^ (q * 64) as slots are 128-byte aligned. Rows
  // past m read the zero block, whatever the slot.
  const int xr = lane & 7, xi = lane >> 3;
  const unsigned x_swizzle = unsigned((xi ^ xr) * 16);
  unsigned x_base[MT], x_moves[MT];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const bool real = 8 * mt + xr < m;
    const unsigned row_at = ring_s + unsigned((8 * mt + xr) * 128);
    x_base[mt] = real ? row_at + x_swizzle : unsigned(__cvta_generic_to_shared(zeros)) + x_swizzle;
    x_moves[mt] = real ? 1u : 0u;
  }
  const unsigned code_lane = ring.x_bytes + unsigned(lane) * 8;
  const unsigned scale_lane = ring.x_bytes + S::kCodeBytes + unsigned(lane / 4) * 4;

  auto& acc = sums.acc;
#pragma unroll
  for (int h = 0; h < kSets; ++h)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int p = 0; p < S::kPairs; ++p)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[h][mt][p][e] = 0.0f;

  // Slot i % kDepth is read at step i; the copies for step i + kAhead go to the slot read at step
  // i - 1 (its reads are over once every lane has passed the __syncwarp).
  // x_off: where the step's x is, from x_base (the slot offset).
  auto compute = [&](unsigned read_off, unsigned x_off) {
    const std::uint8_t* slot = ring.ring + read_off;
    uint2 codes[S::kTiles];
    std::uint32_t scale01[S::kTiles], scale23[S::kTiles];
#pragma unroll
    for (int t = 0; t < S::kTiles; ++t) {
      codes[t] = *reinterpret_cast<const uint2*>(slot + code_lane + t * 256);
      const std::uint32_t sc = *reinterpret_cast<const std::uint32_t*>(slot + scale_lane + t * 32);
      scale01[t] = scales_to_bf16x2<S::kFormat>(sc);
      scale23[t] = scales_to_bf16x2<S::kFormat>(sc >> 16);
    }
    std::uint32_t xb[MT][2][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const unsigned x_at = x_base[mt] + x_off * x_moves[mt];
#pragma unroll
      for (int q = 0; q < 2; ++q) ldmatrix_x4_at(xb[mt][q], x_at ^ unsigned(q * 64));
    }
#pragma unroll
    for (int step = 0; step < 4; ++step) {
#pragma unroll
      for (int p = 0; p < S::kPairs; ++p) {
        // A rows g and g + 8 are row g of tiles 2p and 2p + 1 (w4a16_layout.h).
        std::uint32_t a[4];
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          decode_fragment_pair(codes[2 * p + t], scale01[2 * p + t], scale23[2 * p + t], step, a[t],
                               a[2 + t]);
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_bf16(acc[(step & 1) % kSets][mt][p], a, xb[mt][step / 2][2 * (step % 2)],
                   xb[mt][step / 2][2 * (step % 2) + 1]);
        }
      }
    }
  };
  unsigned read_off = 0, previous_off = kAhead * slot_size;
  auto next_slot = [&](unsigned off) {
    return off + slot_size == ring.ring_bytes ? 0u : off + slot_size;
  };
  int i = 0;
  // Steps with copies to issue, then the last kAhead without (no per-step branch).
  for (; i < steps - kAhead; ++i) {
    cp_async_wait<kAhead - 1>();
    __syncwarp();  // every lane's copies of slot i have landed; slot i - 1 is no longer read
    load.step(ring_s + previous_off);
    cp_async_commit();
    compute(read_off, read_off);
    previous_off = read_off;
    read_off = next_slot(read_off);
  }
  for (; i < steps; ++i) {
    cp_async_wait<kAhead - 1>();
    __syncwarp();
    cp_async_commit();  // an empty group keeps wait_group's count
    compute(read_off, read_off);
    read_off = next_slot(read_off);
  }
}

}  // namespace
}  // namespace nibble::kernels
