#pragma once
// The flash prefill kernel's templates (flash_prefill.h): its configurations, loaders, score and
// softmax steps and the launch of one form. Included by flash_prefill.cu, which instantiates the
// forms the device defaults pick (the production library), and by flash_prefill_dev.cu, which
// instantiates the others for the A/B benchmarks and tests (the dev library). CUDA only.
#include <cuda_bf16.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/attention/attention_sink.cuh"
#include "kernels/attention/cache_slot.cuh"
#include "kernels/attention/decode_attention_plan.h"
#include "kernels/attention/flash_prefill.h"
#include "kernels/attention/kv_fp8.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/mma_sync.cuh"

namespace nibble::kernels::detail {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

// Per head_dim: MT m16 tiles of query rows per warp (two halve the shared-memory reads of every K
// and V fragment, which bound the one-tile form: ~290 bytes of ldmatrix per mma against the
// ~190 an SM's shared memory feeds in an mma's time), KC keys per staged chunk and KS keys per
// score block (the S = QK^T, softmax, O += PV step; KS divides KC), within the registers
// (MT x (D/8 + KS/8) x 4 accumulators per lane) and GB10's ~99 KB per block.
// An FP8 cache's chunks land in a staging area (two buffers of codes) and are widened to BF16
// into one K/V buffer before use, with the same footprint.
template <int D, bool FP8, int KC, int KS>
struct Config {
  static constexpr int MT = D <= 128 ? 2 : 1;
  static constexpr int kRows = kWarps * 16 * MT;  // query rows per block
  static constexpr std::size_t kSmem =
      FP8 ? std::size_t(kRows + 2 * KC) * D * 2 + std::size_t(4 * KC) * D
          : std::size_t(kRows + 4 * KC) * D * 2;
  // FP8 staging: each thread copies and later widens the same 16-code pieces of the chunk.
  static constexpr int kFp8Pieces = KC * (D / 16) / kThreads;
  static_assert(KC * (D / 16) % kThreads == 0);
  static_assert(KC % KS == 0 && KS % 16 == 0);
  static_assert(kSmem <= 96 * 1024, "GB10 gives a block ~99 KB of shared memory");
};

// Keys per staged chunk of the v2 kernel (the flash_options = 0 form): 64 at head_dim 64,
// 32 above.
constexpr int base_chunk(int D) {
  return D <= 64 ? 64 : 32;
}

int rows_per_block(int head_dim) {
  switch (head_dim) {
    case 64:
      return Config<64, false, 64, 64>::kRows;
    case 128:
      return Config<128, false, 32, 32>::kRows;
    default:
      return Config<256, false, 32, 32>::kRows;
  }
}

// Rows of D BF16 values in shared memory as D/8 16-byte chunks; chunk c of row r is stored at
// c ^ (r % 8), so the eight rows an ldmatrix phase reads at one logical chunk hit eight distinct
// bank groups (D >= 64: at least 8 chunks per row).
template <int D>
__device__ __forceinline__ unsigned swizzled(unsigned base, int row, int chunk) {
  return base + unsigned((row * (D / 8) + (chunk ^ (row & 7))) * 16);
}

__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, bool live) {
  cp_async16_to(dst, src, live ? 16u : 0u);  // 0: zero-fill
}

__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

__device__ __forceinline__ float fast_exp2(float x) {  // exp2(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Starts copying the keys and values [c0, c0 + KC) of KV head kvh into the chunk buffers; keys
// outside [first, last] are zero-filled (their scores are masked, their zero values add nothing),
// their block-table entries not read (a sliding window's cache may have freed them).
template <int D, int KC, bool kUnrolled>
__device__ __forceinline__ void load_chunk(const PagedAttentionArgs& a, const std::int32_t* table,
                                           int bs_shift, int kvh, int c0, int first, int last,
                                           unsigned k_s, unsigned v_s) {
  constexpr int kVecs = D / 8, kPerThread = KC * kVecs / kThreads;
  static_assert(KC * kVecs % kThreads == 0);
  // kUnrolled: the block-table loads of all the copies issue back to back (more registers live
  // here; v2's form keeps its rolled loop).
#pragma unroll(kUnrolled ? kPerThread : 1)
  for (int i = 0; i < kPerThread; ++i) {
    const int e = int(threadIdx.x) + i * kThreads, j = e / kVecs, c = e % kVecs, key = c0 + j;
    const bool live = key <= last && key >= first;
    std::int64_t at = 0;
    if (live)
      at = (cache_slot(table, a.block_size, key, bs_shift) * a.shape.kv_heads + kvh) * D + c * 8;
    cp_async16(swizzled<D>(k_s, j, c), a.k_cache + at, live);
    cp_async16(swizzled<D>(v_s, j, c), a.v_cache + at, live);
  }
}

// head_dim 128 with power-of-two cache blocks of >= 16 keys (kFlashOneBarrier): load_chunk's
// pieces of a thread are keys j0 + 8i of the chunk (j0 = thread / 16 < 8) at column thread % 16,
// so pieces 2q and 2q + 1 (keys 16q + j0 and 16q + j0 + 8 of a chunk starting on a multiple of 16)
// lie in one cache block: one table entry serves the pair. The entries are loaded first (before
// the barrier, whose wait hides their latency), the copies issued after it.
template <int D, int KC>
constexpr int kPairsPerThread = KC*(D / 8) / kThreads / 2;

template <int kPairs>
__device__ __forceinline__ void load_chunk_entries(const std::int32_t* table, int bs_shift, int c0,
                                                   int first, int last, int (&entry)[kPairs]) {
  const int j0 = int(threadIdx.x) / 16;
#pragma unroll
  for (int q = 0; q < kPairs; ++q) {
    const int key = c0 + j0 + 16 * q;  // and key + 8: the entry serves the pair if either is live
    entry[q] = key <= last && key + 8 >= first ? table[key >> bs_shift] : 0;
  }
}

// The pair's two pieces are 8 cache rows apart in one block, and every piece of the thread has the
// same column: one 64-bit offset per pair, the rest constants (dead pieces copy nothing; their
// addresses stay inside block 0 or the pair's block).
template <int D, int kPairs>
__device__ __forceinline__ void load_chunk_paired(const PagedAttentionArgs& a,
                                                  const int (&entry)[kPairs], int bs_shift, int kvh,
                                                  int c0, int first, int last, unsigned k_s,
                                                  unsigned v_s) {
  static_assert(D == 128, "16 threads per key row");
  const int j0 = int(threadIdx.x) / 16, c = int(threadIdx.x) % 16, in_block = (1 << bs_shift) - 1;
  const std::int64_t row_elems = std::int64_t(a.shape.kv_heads) * D;  // one cache row (token)
  const std::uint16_t* const k_col = a.k_cache + kvh * D + c * 8;
  const std::uint16_t* const v_col = a.v_cache + kvh * D + c * 8;
  // swizzled<D>(., j, c) for j = j0 + 16 q + 8 h: j & 7 = j0.
  const unsigned dst = unsigned(j0 * D * 2 + ((c ^ j0) * 16));
#pragma unroll
  for (int q = 0; q < kPairs; ++q) {
    const int key = c0 + j0 + 16 * q;
    const std::int64_t off = ((std::int64_t(entry[q]) << bs_shift) + (key & in_block)) * row_elems;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const bool live = key + 8 * h <= last && key + 8 * h >= first;
      const unsigned at = dst + unsigned((16 * q + 8 * h) * D * 2);
      cp_async16(k_s + at, k_col + off + 8 * h * row_elems, live);
      cp_async16(v_s + at, v_col + off + 8 * h * row_elems, live);
    }
  }
}

// FP8: starts copying the codes of keys [c0, c0 + KC) into a staging buffer (keys outside
// [first, last] zero-filled) and loads their rows' scales into registers (0 outside).
template <int D, int KC, int kPieces>
__device__ __forceinline__ void stage_fp8_chunk(const PagedAttentionArgs& a,
                                                const std::int32_t* table, int bs_shift, int kvh,
                                                int c0, int first, int last, unsigned k_stage,
                                                unsigned v_stage, float (&k_scale)[kPieces],
                                                float (&v_scale)[kPieces]) {
#pragma unroll
  for (int p = 0; p < kPieces; ++p) {
    const int e = threadIdx.x + p * kThreads, j = e / (D / 16), c = e % (D / 16), key = c0 + j;
    const bool live = key <= last && key >= first;
    std::int64_t row = 0;
    if (live) row = cache_slot(table, a.block_size, key, bs_shift) * a.shape.kv_heads + kvh;
    cp_async16(k_stage + unsigned(j * D + c * 16), a.k_cache8 + row * D + c * 16, live);
    cp_async16(v_stage + unsigned(j * D + c * 16), a.v_cache8 + row * D + c * 16, live);
    k_scale[p] = live ? bf16_bits_to_float(a.k_scale[row]) : 0.0f;
    v_scale[p] = live ? bf16_bits_to_float(a.v_scale[row]) : 0.0f;
  }
}

// FP8: widens this thread's staged pieces (after its cp.async wait) to BF16 rows of the K/V
// buffer, scaled; values are exact in FP16, so the only rounding is the product's to BF16.
template <int D, int kPieces>
__device__ __forceinline__ void widen_fp8_piece(const unsigned char* stage, float scale,
                                                unsigned char* out_base, int j, int c) {
  const uint4 codes = *reinterpret_cast<const uint4*>(stage + j * D + c * 16);
  const std::uint32_t words[4] = {codes.x, codes.y, codes.z, codes.w};
  std::uint32_t packed[8];
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const float2 lo = fp8x2_to_float2(std::uint16_t(words[w] & 0xffffu));
    const float2 hi = fp8x2_to_float2(std::uint16_t(words[w] >> 16));
    packed[2 * w] = pack_bf16(lo.x * scale, lo.y * scale);
    packed[2 * w + 1] = pack_bf16(hi.x * scale, hi.y * scale);
  }
  const unsigned base = unsigned(__cvta_generic_to_shared(out_base));
  auto* first = reinterpret_cast<uint4*>(out_base + (swizzled<D>(base, j, 2 * c) - base));
  auto* second = reinterpret_cast<uint4*>(out_base + (swizzled<D>(base, j, 2 * c + 1) - base));
  *first = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  *second = make_uint4(packed[4], packed[5], packed[6], packed[7]);
}

template <int D, int KC, int kPieces>
__device__ __forceinline__ void widen_fp8_chunk(const unsigned char* k_stage,
                                                const unsigned char* v_stage,
                                                const float (&k_scale)[kPieces],
                                                const float (&v_scale)[kPieces], unsigned char* k_s,
                                                unsigned char* v_s) {
#pragma unroll
  for (int p = 0; p < kPieces; ++p) {
    const int e = threadIdx.x + p * kThreads, j = e / (D / 16), c = e % (D / 16);
    widen_fp8_piece<D, kPieces>(k_stage, k_scale[p], k_s, j, c);
    widen_fp8_piece<D, kPieces>(v_stage, v_scale[p], v_s, j, c);
  }
}

// The ldmatrix addresses of the mma fragments (the kLazy kernels), equal to swizzled<D>() of the
// rows and 16-byte chunks the loops name, with the arithmetic taken out of the loops: a fragment's
// rows are 8-row aligned groups plus a lane part (lane % 8 + 8 b), so row & 7 = lane & 7, and its
// chunk is 2 i + b' (b' one bit), so chunk ^ (row & 7) = 2 i ^ (b' ^ lane & 7), in bytes
// (32 i) ^ (16 (b' ^ lane & 7)): one XOR per i (shared by every row group) plus constant offsets.
template <int D>
struct FragmentAddresses {
  static constexpr unsigned kRowBytes = D * 2;
  unsigned q_lane;    // q_s + the lane's row in m tile 0 of the warp
  unsigned kv_lane;   // the lane's row in a 16-key group, K operand (rows lane % 8 + 8 (lane / 16))
  unsigned v_lane;    // the same for V.trans and Q (rows lane % 8 + 8 ((lane / 8) % 2))
  unsigned x_q, x_k;  // 16 (b' ^ lane & 7) for Q and V (b' = lane / 16), for K (b' = lane / 8 % 2)

  __device__ __forceinline__ FragmentAddresses(unsigned q_s, int row0, int lane) {
    v_lane = unsigned(lane % 8 + 8 * ((lane / 8) % 2)) * kRowBytes;
    kv_lane = unsigned(lane % 8 + 8 * (lane / 16)) * kRowBytes;
    q_lane = q_s + unsigned(row0) * kRowBytes + v_lane;
    x_q = 16u * unsigned((lane / 16) ^ (lane & 7));
    x_k = 16u * unsigned(((lane / 8) % 2) ^ (lane & 7));
  }
  // m tile t, k step ks (16 of the head dims).
  __device__ __forceinline__ unsigned q(int t, int ks) const {
    return q_lane + unsigned(t) * 16 * kRowBytes + ((32u * unsigned(ks)) ^ x_q);
  }
  // Keys [kb0 + 16 np, + 16) of the chunk at k_s, k step ks.
  __device__ __forceinline__ unsigned k(unsigned k_s, int kb0, int np, int ks) const {
    return k_s + unsigned(kb0 + 16 * np) * kRowBytes + kv_lane + ((32u * unsigned(ks)) ^ x_k);
  }
  // Keys [kb0 + 16 kk, + 16) of the chunk at v_s, head dims [16 dp, + 16).
  __device__ __forceinline__ unsigned v(unsigned v_s, int kb0, int kk, int dp) const {
    return v_s + unsigned(kb0 + 16 * kk) * kRowBytes + v_lane + ((32u * unsigned(dp)) ^ x_q);
  }
};

// O rows times their row's factor (lanes hold rows lane / 4 and lane / 4 + 8 of each m tile).
template <int MT, int D>
__device__ __forceinline__ void rescale_rows(float (&o)[MT][D / 8][4], const float (&f)[MT][2]) {
#pragma unroll
  for (int t = 0; t < MT; ++t)
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      o[t][dt][0] *= f[t][0];
      o[t][dt][1] *= f[t][0];
      o[t][dt][2] *= f[t][1];
      o[t][dt][3] *= f[t][1];
    }
}

// grid: (tiles, kv heads, splits). Query row r of the block is position r / G of the tile and
// query head kvh * G + r % G; warp w owns rows [16 MT w, 16 MT (w + 1)).
// kFast (kFlashFastSoftmax): the running max stays in raw-score units, so that each probability is
// one FFMA and one ex2 (exp2(s * scale_log2 - m * scale_log2)), and the O accumulators are
// rescaled only when some row of the warp has a larger max (late in a long prompt the max seldom
// moves: most score blocks skip the MT x D/2 multiplies). kFast off is the v2 arithmetic.
// kLazy (kFlashLazyRescale, with kFast): m is a reference max that O and l are relative to; it
// moves (and O, l with it) only when some row's block max passes it by more than
// kLazyHeadroom in log2 units, so the probabilities stay <= 2^kLazyHeadroom (far inside FP32 and
// BF16 range), and the exponentials are computed inside the P.V loop, in the same basic block as
// its mma.sync: the scheduler overlaps the ex2 (a quarter-rate pipe) with the tensor work instead
// of running them one after the other.
constexpr float kLazyHeadroom = 8.0f;

template <int D, bool FP8, int KC, int KS, bool kFast, bool kLazy>
__global__ void __launch_bounds__(kThreads)
    flash_prefill_kernel(PagedAttentionArgs a, bool skip_single_rows, int bs_shift, int options) {
  static_assert(kFast || !kLazy, "the lazy rescale keeps the max in raw-score units");
  kernels::allow_next_grid();  // the o projection may start fetching its weights
  using C = Config<D, FP8, KC, KS>;
  constexpr int MT = C::MT, kVecs = D / 8, kPieces = FP8 ? C::kFp8Pieces : 1;
  // Later tiles of a sequence see more keys: run them first.
  const AttentionTile tile = a.tiles[a.num_tiles - 1 - int(blockIdx.x)];
  if (skip_single_rows && tile.rows == 1) return;
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned q_s = unsigned(__cvta_generic_to_shared(smem));
  const unsigned kv_s = q_s + C::kRows * D * 2;  // [2 buffers (FP8: 1)][K, V][KC][D]
  constexpr unsigned kTensorBytes = KC * D * 2;
  // FP8 staging after the one K/V buffer: [2 buffers][K, V][KC][D] codes.
  const unsigned stage_s = kv_s + 2 * kTensorBytes;
  unsigned char* const smem_at = smem - q_s;  // generic pointer of shared address 0 (+ offset)
  float k_scale[kPieces], v_scale[kPieces], k_next[kPieces], v_next[kPieces];
  const int G = a.shape.q_heads / a.shape.kv_heads, used_rows = (C::kRows / G) * G;
  const int kvh = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int last = tile.position0 + tile.rows - 1;
  const std::int32_t* table = a.block_tables + tile.table_offset;
  // The chunks of keys [first, last]: from the tile's first row's window start (a sliding window:
  // the chunks before it are never loaded), else from 0; split over the blocks.
  const int first = decode_plan::first_key(tile.position0, a.window), c_first = first / KC;
  const int splits = gridDim.z, chunks = last / KC + 1 - c_first,
            per = (chunks + splits - 1) / splits;
  const int c_begin = (c_first + int(blockIdx.z) * per) * KC,
            c_end = (c_first + min(chunks, int(blockIdx.z + 1) * per)) * KC;

  auto q_row = [&](int r) {  // row of q / out for query row r (valid rows only)
    return (std::int64_t(tile.row0 + r / G) * a.shape.q_heads + kvh * G + r % G) * D;
  };
  auto valid = [&](int r) { return r < used_rows && r / G < tile.rows; };
  for (int e = threadIdx.x; e < C::kRows * kVecs; e += kThreads) {
    const int r = e / kVecs, c = e % kVecs;
    const bool live = valid(r);
    cp_async16(swizzled<D>(q_s, r, c), a.q + (live ? q_row(r) + c * 8 : 0), live);
  }
  if (c_begin < c_end) {
    if constexpr (FP8)
      stage_fp8_chunk<D, KC, kPieces>(a, table, bs_shift, kvh, c_begin, first, last, stage_s,
                                      stage_s + KC * D, k_scale, v_scale);
    else
      load_chunk<D, KC, kFast>(a, table, bs_shift, kvh, c_begin, first, last, kv_s,
                               kv_s + kTensorBytes);
  }
  cp_async_commit();

  // This lane's rows of every accumulator fragment: in m tile t, lane / 4 and lane / 4 + 8 (h = 0,
  // 1) of the warp's rows from row0 + 16 t. Rows that do not exist take the tile's last position
  // (finite scores; never written out).
  const int row0 = warp * 16 * MT;
  auto lane_row = [&](int t, int h) { return row0 + 16 * t + lane / 4 + 8 * h; };
  int pos[MT][2];
#pragma unroll
  for (int t = 0; t < MT; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      pos[t][h] = valid(lane_row(t, h)) ? tile.position0 + lane_row(t, h) / G : last;
  // The warp's last position: score blocks whose keys all lie past it are fully masked for every
  // row of the warp and are skipped (warp-uniform, so the mma.sync stay converged).
  int warp_last = 0, warp_first = last;
#pragma unroll
  for (int t = 0; t < MT; ++t) {
    warp_last = max(warp_last, max(pos[t][0], pos[t][1]));
    warp_first = min(warp_first, min(pos[t][0], pos[t][1]));
  }
#pragma unroll
  for (int w = 16; w >= 1; w /= 2) {
    warp_last = max(warp_last, __shfl_xor_sync(0xffffffffu, warp_last, w));
    warp_first = min(warp_first, __shfl_xor_sync(0xffffffffu, warp_first, w));
  }
  // A sliding window (warp-uniform bounds; 0 without one, below every key): score blocks wholly
  // before every row's window are skipped, those starting before some row's window masked.
  const int warp_skip_below = a.window > 0 ? warp_first - a.window + 1 : 0,
            warp_cut_below = a.window > 0 ? warp_last - a.window + 1 : 0;
  const float scale_log2 = a.scale * 1.4426950408889634f;
  const FragmentAddresses<D> frag(q_s, row0, lane);
  // Run-time forms (no instantiation of their own): see kFlashOneBarrier and kFlashMaskFree.
  // Only the lazy kernels look at them: the other forms keep their v3 code (and registers).
  const bool one_barrier = kLazy && !FP8 && (options & kFlashOneBarrier) != 0,
             mask_free = kLazy && (options & kFlashMaskFree) != 0;
  // m: kFast in raw-score units, else in scaled log2 units.
  float o[MT][D / 8][4], m[MT][2], l[MT][2];
#pragma unroll
  for (int t = 0; t < MT; ++t) {
    m[t][0] = m[t][1] = -INFINITY;
    l[t][0] = l[t][1] = 0.0f;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) o[t][i][0] = o[t][i][1] = o[t][i][2] = o[t][i][3] = 0.0f;
  }

  for (int c0 = c_begin, buf = 0; c0 < c_end; c0 += KC, buf ^= 1) {
    const unsigned k_s = kv_s + (FP8 ? 0u : unsigned(buf) * 2 * kTensorBytes),
                   v_s = k_s + kTensorBytes;
    if constexpr (FP8) {
      // Stage the next chunk's codes, widen this one's (this thread's own pieces: its wait
      // covers them) into the BF16 buffer, whose last readers passed the loop's final barrier.
      const unsigned stage = stage_s + unsigned(buf) * 2 * KC * D;
      if (c0 + KC < c_end) {
        const unsigned next = stage_s + unsigned(buf ^ 1) * 2 * KC * D;
        stage_fp8_chunk<D, KC, kPieces>(a, table, bs_shift, kvh, c0 + KC, first, last, next,
                                        next + KC * D, k_next, v_next);
        cp_async_commit();
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      widen_fp8_chunk<D, KC, kPieces>(smem_at + stage, smem_at + stage + KC * D, k_scale, v_scale,
                                      smem_at + k_s, smem_at + v_s);
#pragma unroll
      for (int p = 0; p < kPieces; ++p) {
        k_scale[p] = k_next[p];
        v_scale[p] = v_next[p];
      }
    } else if (one_barrier) {
      // This chunk (the only group in flight) landed for every thread, and every warp is past
      // the previous chunk, whose buffer takes the next one: one barrier per chunk.
      const bool has_next = c0 + KC < c_end;
      constexpr bool kPairable = D == 128 && KC % 16 == 0;
      const bool paired = kPairable && bs_shift >= 4;
      int entry[kPairable ? kPairsPerThread<D, KC> : 1] = {};
      if constexpr (kPairable)
        if (paired && has_next) load_chunk_entries(table, bs_shift, c0 + KC, first, last, entry);
      cp_async_wait<0>();
      __syncthreads();
      if (has_next) {
        const unsigned next = kv_s + unsigned(buf ^ 1) * 2 * kTensorBytes;
        if constexpr (kPairable)
          if (paired)
            load_chunk_paired<D>(a, entry, bs_shift, kvh, c0 + KC, first, last, next,
                                 next + kTensorBytes);
        if (!paired)
          load_chunk<D, KC, kFast>(a, table, bs_shift, kvh, c0 + KC, first, last, next,
                                   next + kTensorBytes);
        cp_async_commit();
      }
    } else if (c0 + KC < c_end) {  // the next chunk into the other buffer, then wait for this one
      const unsigned next = kv_s + unsigned(buf ^ 1) * 2 * kTensorBytes;
      load_chunk<D, KC, kFast>(a, table, bs_shift, kvh, c0 + KC, first, last, next,
                               next + kTensorBytes);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    if (FP8 || !one_barrier) __syncthreads();

#pragma unroll 1
    for (int kb0 = 0; kb0 < KC; kb0 += KS) {  // score blocks: keys [c0 + kb0, c0 + kb0 + KS)
      const int k0 = c0 + kb0;
      if (k0 > warp_last) break;  // this and later blocks: every key masked for the warp
      if (k0 + KS <= warp_skip_below) continue;  // every key before the warp's windows

      // Blocks that reach the tile's first position have keys to mask, as do blocks that start
      // before some row's window.
      const bool diagonal = k0 + KS - 1 > tile.position0, cut = k0 < warp_cut_below;
      // One score block: S = QK^T, softmax, O += PV. kMasked false: no masking code at all, so
      // that (kFlashMaskFree) QK^T, the row max and its vote form one basic block.
      auto score_block = [&](auto masked) {
        constexpr bool kMasked = decltype(masked)::value;
        // S = Q . K^T for this warp's rows and the block's KS keys; each K fragment feeds MT tiles.
        float s[MT][KS / 8][4];
#pragma unroll
        for (int t = 0; t < MT; ++t)
#pragma unroll
          for (int i = 0; i < KS / 8; ++i) s[t][i][0] = s[t][i][1] = s[t][i][2] = s[t][i][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) {
          std::uint32_t qa[MT][4];
#pragma unroll
          for (int t = 0; t < MT; ++t)
            ldmatrix_x4_at(qa[t],
                           kLazy ? frag.q(t, ks)
                                 : swizzled<D>(q_s, row0 + 16 * t + lane % 8 + 8 * ((lane / 8) % 2),
                                               2 * ks + lane / 16));
#pragma unroll
          for (int np = 0; np < KS / 16; ++np) {
            std::uint32_t kb[4];
            ldmatrix_x4_at(kb, kLazy ? frag.k(k_s, kb0, np, ks)
                                     : swizzled<D>(k_s, kb0 + np * 16 + lane % 8 + 8 * (lane / 16),
                                                   2 * ks + (lane / 8) % 2));
#pragma unroll
            for (int t = 0; t < MT; ++t) {
              mma_bf16(s[t][2 * np], qa[t], kb[0], kb[1]);
              mma_bf16(s[t][2 * np + 1], qa[t], kb[2], kb[3]);
            }
          }
        }

        // Mask keys past each row's position (only blocks that reach the tile's first position have
        // any), online softmax in the exp2 domain.
        [[maybe_unused]] float
            base[MT][2];  // kFast: the exponent's subtrahend per row (scaled log2 units)
        if constexpr (kFast) {
          // The mask in its own (block-uniform) branch: kept out of the other blocks' instruction
          // stream rather than predicated into it.
          if (kMasked && diagonal) {
#pragma unroll
            for (int t = 0; t < MT; ++t)
#pragma unroll
              for (int nt = 0; nt < KS / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                  if (k0 + nt * 8 + 2 * (lane % 4) + (e & 1) > pos[t][e / 2])
                    s[t][nt][e] = -INFINITY;
          }
          if (kMasked && cut) {
#pragma unroll
            for (int t = 0; t < MT; ++t)
#pragma unroll
              for (int nt = 0; nt < KS / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                  if (k0 + nt * 8 + 2 * (lane % 4) + (e & 1) <= pos[t][e / 2] - a.window)
                    s[t][nt][e] = -INFINITY;
          }
          if constexpr (kLazy) {
            float mx[MT][2];
            bool behind = false;
#pragma unroll
            for (int t = 0; t < MT; ++t) {
              mx[t][0] = mx[t][1] = -INFINITY;
#pragma unroll
              for (int nt = 0; nt < KS / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) mx[t][e / 2] = fmaxf(mx[t][e / 2], s[t][nt][e]);
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                mx[t][h] = quad_max(mx[t][h]);
                // m = -inf: any finite max is ahead (-inf + headroom = -inf).
                behind |= __fmul_rn(mx[t][h], scale_log2) >
                          __fmul_rn(m[t][h], scale_log2) + kLazyHeadroom;
              }
            }
            if (__any_sync(0xffffffffu, behind)) {  // rare: every row of the warp moves to its max
              float alpha[MT][2];
#pragma unroll
              for (int t = 0; t < MT; ++t)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                  const float next = fmaxf(m[t][h], mx[t][h]);
                  alpha[t][h] =
                      next == m[t][h]
                          ? 1.0f
                          : fast_exp2(__fmul_rn(m[t][h], scale_log2) - __fmul_rn(next, scale_log2));
                  l[t][h] *= alpha[t][h];
                  m[t][h] = next;
                }
              rescale_rows<MT, D>(o, alpha);
            }
#pragma unroll
            for (int t = 0; t < MT; ++t)
#pragma unroll
              for (int h = 0; h < 2; ++h)  // a row with no key yet: exponents stay finite
                base[t][h] = m[t][h] == -INFINITY ? 0.0f : __fmul_rn(m[t][h], scale_log2);
          } else {
            float alpha[MT][2];
            bool grew = false;
#pragma unroll
            for (int t = 0; t < MT; ++t) {
              float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
              for (int nt = 0; nt < KS / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) mx[e / 2] = fmaxf(mx[e / 2], s[t][nt][e]);
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const float next = fmaxf(m[t][h], quad_max(mx[h]));
                // A row may see no key yet in this block's share of a split: keep exponents finite.
                base[t][h] = next == -INFINITY ? 0.0f : __fmul_rn(next, scale_log2);
                // Unchanged max: exactly 1 (no rounding of m * scale_log2 - base to trust).
                alpha[t][h] =
                    next == m[t][h] ? 1.0f : fast_exp2(__fmul_rn(m[t][h], scale_log2) - base[t][h]);
                grew |= next != m[t][h];
                m[t][h] = next;
              }
            }
#pragma unroll
            for (int t = 0; t < MT; ++t)
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                float sum = 0.0f;
#pragma unroll
                for (int nt = 0; nt < KS / 8; ++nt) {
                  s[t][nt][2 * h] = fast_exp2(fmaf(s[t][nt][2 * h], scale_log2, -base[t][h]));
                  s[t][nt][2 * h + 1] =
                      fast_exp2(fmaf(s[t][nt][2 * h + 1], scale_log2, -base[t][h]));
                  sum += s[t][nt][2 * h] + s[t][nt][2 * h + 1];
                }
                l[t][h] = l[t][h] * alpha[t][h] + sum;  // this lane's share of the row sum
              }
            if (__any_sync(0xffffffffu, grew)) rescale_rows<MT, D>(o, alpha);
          }  // !kLazy
        } else {
#pragma unroll
          for (int t = 0; t < MT; ++t) {
            float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int nt = 0; nt < KS / 8; ++nt)
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                const int key = k0 + nt * 8 + 2 * (lane % 4) + (e & 1);
                float v = s[t][nt][e] * scale_log2;
                if (kMasked && diagonal && key > pos[t][e / 2]) v = -INFINITY;
                if (kMasked && cut && key <= pos[t][e / 2] - a.window) v = -INFINITY;
                s[t][nt][e] = v;
                mx[e / 2] = fmaxf(mx[e / 2], v);
              }
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const float next = fmaxf(m[t][h], quad_max(mx[h]));
              // A row may see no key yet in this block's share of a split: keep exponents finite.
              const float base = next == -INFINITY ? 0.0f : next;
              const float alpha = fast_exp2(m[t][h] - base);
              m[t][h] = next;
              float sum = 0.0f;
#pragma unroll
              for (int nt = 0; nt < KS / 8; ++nt) {
                s[t][nt][2 * h] = fast_exp2(s[t][nt][2 * h] - base);
                s[t][nt][2 * h + 1] = fast_exp2(s[t][nt][2 * h + 1] - base);
                sum += s[t][nt][2 * h] + s[t][nt][2 * h + 1];
              }
              l[t][h] = l[t][h] * alpha + sum;  // this lane's share of the row sum
#pragma unroll
              for (int dt = 0; dt < D / 8; ++dt) {
                o[t][dt][2 * h] *= alpha;
                o[t][dt][2 * h + 1] *= alpha;
              }
            }
          }
        }

        // O += P . V: the score fragments of keys [16kk, 16kk + 16) are the A operand as they lie;
        // each V fragment feeds MT tiles. kLazy: the probabilities of those keys are computed here.
        [[maybe_unused]] float lazy_sum[MT][2] = {};
#pragma unroll
        for (int kk = 0; kk < KS / 16; ++kk) {
          if constexpr (kLazy) {
#pragma unroll
            for (int t = 0; t < MT; ++t)
#pragma unroll
              for (int nt = 2 * kk; nt < 2 * kk + 2; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                  s[t][nt][e] = fast_exp2(fmaf(s[t][nt][e], scale_log2, -base[t][e / 2]));
                  lazy_sum[t][e / 2] += s[t][nt][e];
                }
          }
          std::uint32_t pa[MT][4];
#pragma unroll
          for (int t = 0; t < MT; ++t) {
            pa[t][0] = pack_bf16(s[t][2 * kk][0], s[t][2 * kk][1]);
            pa[t][1] = pack_bf16(s[t][2 * kk][2], s[t][2 * kk][3]);
            pa[t][2] = pack_bf16(s[t][2 * kk + 1][0], s[t][2 * kk + 1][1]);
            pa[t][3] = pack_bf16(s[t][2 * kk + 1][2], s[t][2 * kk + 1][3]);
          }
#pragma unroll
          for (int dp = 0; dp < D / 16; ++dp) {
            std::uint32_t vb[4];
            ldmatrix_x4_trans_at(
                vb, kLazy ? frag.v(v_s, kb0, kk, dp)
                          : swizzled<D>(v_s, kb0 + kk * 16 + lane % 8 + 8 * ((lane / 8) % 2),
                                        2 * dp + lane / 16));
#pragma unroll
            for (int t = 0; t < MT; ++t) {
              mma_bf16(o[t][2 * dp], pa[t], vb[0], vb[1]);
              mma_bf16(o[t][2 * dp + 1], pa[t], vb[2], vb[3]);
            }
          }
        }
        if constexpr (kLazy) {
#pragma unroll
          for (int t = 0; t < MT; ++t) {
            l[t][0] += lazy_sum[t][0];
            l[t][1] += lazy_sum[t][1];
          }
        }
      };
      if (kLazy && mask_free && !diagonal && !cut)
        score_block(std::false_type{});
      else
        score_block(std::true_type{});
    }
    if (FP8 || !one_barrier) __syncthreads();  // buffer `buf` is free for the chunk after next
  }
  cp_async_wait<0>();  // a block with no chunk still staged q

  const int col = 2 * (lane % 4);
  // The running max in natural-log units of the scaled score (merge_splits' unit).
  const float m_to_ln = kFast ? a.scale : 0.6931471805599453f;
#pragma unroll
  for (int t = 0; t < MT; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float sum = quad_sum(l[t][h]);
      const int r = lane_row(t, h);
      if (!valid(r)) continue;
      if (splits == 1) {
        // The row's reference in log2 units (kFast: m in raw-score units), the sink beside it.
        const float inv = softmax_row_factor(sum, kFast ? __fmul_rn(m[t][h], scale_log2) : m[t][h],
                                             a.sinks, kvh * G + r % G);
        auto* out = reinterpret_cast<std::uint32_t*>(a.out + q_row(r) + col);
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt)
          out[dt * 4] = pack_bf16(o[t][dt][2 * h] * inv, o[t][dt][2 * h + 1] * inv);
        continue;
      }
      // Partial results for merge_splits: [split][row, head][D unnormalised sums, max, sum].
      float* part = a.workspace +
                    (std::int64_t(blockIdx.z) * a.rows * a.shape.q_heads + q_row(r) / D) * (D + 2);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        part[dt * 8 + col] = o[t][dt][2 * h];
        part[dt * 8 + col + 1] = o[t][dt][2 * h + 1];
      }
      if (lane % 4 == 0) {
        part[D] = m[t][h] == -INFINITY ? -INFINITY : m[t][h] * m_to_ln;
        part[D + 1] = sum;
      }
    }
}

template <int D, bool FP8, int KC, int KS, bool kFast, bool kLazy = false>
cudaError_t launch(const PagedAttentionArgs& a, int options, int splits, bool skip_single_rows,
                   cudaStream_t stream) {
  constexpr std::size_t smem = Config<D, FP8, KC, KS>::kSmem;
  auto* kernel = flash_prefill_kernel<D, FP8, KC, KS, kFast, kLazy>;
  // Above 48 KB the kernel must opt in; once, not on every layer of every step.
  static std::atomic<bool> opted_in{false};
  if (!opted_in.load(std::memory_order_relaxed)) {
    const cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (err != cudaSuccess) return err;
    opted_in.store(true, std::memory_order_relaxed);
  }
  const dim3 grid(unsigned(a.num_tiles), unsigned(a.shape.kv_heads), unsigned(splits));
  kernel<<<grid, kThreads, smem, stream>>>(a, skip_single_rows, block_shift(a.block_size, options),
                                           options);
  return cudaGetLastError();
}

}  // namespace
}  // namespace nibble::kernels::detail
