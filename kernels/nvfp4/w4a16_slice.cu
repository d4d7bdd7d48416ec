// The W4A16 slice kernels' entry points (w4a16_slice_common.cuh lists the kernels' files): the
// shapes the planners pick (nvfp4_linear.h: the 16- and 32-row slices; moe_experts.h: the grouped
// kSlice16 and the MoE fusions). The others run from nibble::kernels_dev (w4a16_slice_dev.cu).
#include "kernels/nvfp4/w4a16_slice_dense.cuh"
#include "kernels/nvfp4/w4a16_slice_down_combine.cuh"
#include "kernels/nvfp4/w4a16_slice_gate_up_silu.cuh"
#include "kernels/nvfp4/w4a16_slice_grouped.cuh"

namespace nibble::kernels {

int w4a16_slice_resident_blocks(W4A16Tile tile) {
  return with_slice_shape(tile, [](auto shape) { return decltype(shape)::kMinBlocks; });
}

int w4a16_slice_ring_steps(W4A16Tile tile) {
  return with_slice_shape(tile, [](auto shape) {
    using S = decltype(shape);
    return S::kWarps * S::kDepth;
  });
}

int w4a16_slice_smem_bytes(W4A16Tile tile, std::int64_t m) {
  const int rows = int(m < 1 ? 1 : (m > kMaxRows ? kMaxRows : m));
  return with_slice_shape(tile, [&](auto shape) { return smem_bytes<decltype(shape)>(rows); });
}

cudaError_t w4a16_slice_linear(const std::uint16_t* x, std::int64_t m, const W4A16DeviceWeight& w,
                               const std::uint16_t* residual, std::uint16_t* out, W4A16Tile tile,
                               cudaStream_t stream, bool overlap) {
  if (m > kMaxRows) return cudaErrorInvalidValue;
  switch (tile) {
    case W4A16Tile::kSlice16:
      return launch_slice<Slice16>(x, m, w, residual, out, stream, overlap);
    case W4A16Tile::kSlice16Wide:
      return launch_slice<Slice16Wide>(x, m, w, residual, out, stream, overlap);
    case W4A16Tile::kSlice32:
      return launch_slice<Slice32>(x, m, w, residual, out, stream, overlap);
    case W4A16Tile::kSlice32Wide:
      return launch_slice<Slice32Wide>(x, m, w, residual, out, stream, overlap);
    default:  // the 64-row slices: nibble::kernels_dev (w4a16_dev_tiles.h)
      return w4a16_run_dev_linear(x, m, w, residual, out, tile, 1, nullptr, stream, overlap);
  }
}

namespace {
// The grouped slice (S), gate_up + SiLU (G) and down + combine (D) kernels' attributes, of one
// weight format.
template <class G, class D>
cudaError_t fused_attributes() {
  for (const cudaError_t err :
       {gate_up_silu_attribute<G, 1, false>(), gate_up_silu_attribute<G, 2, false>(),
        down_combine_attribute<D, 1, false>(), down_combine_attribute<D, 2, false>(),
        gate_up_silu_attribute<G, 1, true>(), down_combine_attribute<D, 1, true>()}) {
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}
template <class S, class G, class D>
cudaError_t grouped_slice_attributes() {
  for (const cudaError_t err : {grouped_slice_attribute<S, 1>(), grouped_slice_attribute<S, 2>(),
                                fused_attributes<G, D>()}) {
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}
}  // namespace

// The grouped forms the MoE planner takes (moe_experts.h: kSlice16 and the fusions), for both
// weight formats; the others set their own attributes in nibble::kernels_dev.
cudaError_t w4a16_grouped_slice_prepare() {
  for (const cudaError_t err :
       {grouped_slice_attributes<Slice16, SliceGateUpSilu, SliceDownCombine>(),
        grouped_slice_attributes<SliceMxfp4<Slice16>, SliceMxfp4<SliceGateUpSilu>,
                                 SliceMxfp4<SliceDownCombine>>(),
        fused_attributes<SliceClampedSwiglu<SliceGateUpSilu>,
                         SliceClampedSwiglu<SliceDownCombine>>(),
        fused_attributes<SliceClampedSwiglu<SliceMxfp4<SliceGateUpSilu>>,
                         SliceClampedSwiglu<SliceMxfp4<SliceDownCombine>>>()}) {
    if (err != cudaSuccess) return err;
  }
  return w4a16_grouped_experts_routed_prepare();
}

cudaError_t w4a16_grouped_slice_linear(const std::uint16_t* x, const W4A16GroupedWeights& w,
                                       const MoeRowBlock* blocks, std::int64_t max_blocks,
                                       int block_rows, W4A16Tile tile, std::uint16_t* out,
                                       cudaStream_t stream) {
  // w4a16_grouped_linear sends the other slices to nibble::kernels_dev.
  if (block_rows < 1 || block_rows > kMaxRows || tile != W4A16Tile::kSlice16)
    return cudaErrorInvalidValue;
  return with_slice_format<Slice16>(w.shape.format, [&](auto shape) {
    return launch_grouped_slice<decltype(shape)>(x, w, blocks, max_blocks, block_rows, out, stream);
  });
}

}  // namespace nibble::kernels

namespace nibble::kernels {

cudaError_t w4a16_grouped_gate_up_silu(const std::uint16_t* x, const std::int32_t* token,
                                       const W4A16GroupedWeights& gate_up,
                                       const MoeRowBlock* blocks, std::int64_t max_blocks,
                                       int block_rows, std::uint16_t* middle, cudaStream_t stream,
                                       bool overlap, const W4A16ClampedSwiglu* clamped_swiglu) {
  const W4A16DeviceWeight& shape = gate_up.shape;
  if (block_rows < 1 || block_rows > kMaxRows || max_blocks < 1 || max_blocks > 65535 ||
      shape.n % 32 != 0 || token == nullptr || gate_up.table == nullptr)
    return cudaErrorInvalidValue;
  W4A16GroupedCombine fuse;
  fuse.token = token;
  fuse.clamped_swiglu = clamped_swiglu != nullptr;
  if (clamped_swiglu != nullptr) fuse.swiglu = *clamped_swiglu;
  return with_expert_shape<SliceGateUpSilu>(shape.format, fuse.clamped_swiglu, [&](auto s) {
    using S = decltype(s);
    return block_rows > 8 ? launch_gate_up_silu<S, 2, false>(x, gate_up, blocks, max_blocks, middle,
                                                             stream, fuse, overlap)
                          : launch_gate_up_silu<S, 1, false>(x, gate_up, blocks, max_blocks, middle,
                                                             stream, fuse, overlap);
  });
}

std::int64_t w4a16_grouped_combine_slices(std::int64_t n) {
  return (n + 127) / 128 * (128 / SliceDownCombine::kRows);  // the grid's slices of n_padded
}

cudaError_t w4a16_grouped_down_combine(const std::uint16_t* x, const W4A16GroupedWeights& down,
                                       const MoeRowBlock* blocks, std::int64_t max_blocks,
                                       int block_rows, const W4A16GroupedCombine& combine,
                                       std::uint16_t* expert_out, cudaStream_t stream,
                                       bool overlap) {
  if (block_rows < 1 || block_rows > kMaxRows || max_blocks < 1 || max_blocks > 65535 ||
      down.table == nullptr || combine.k < 1 || combine.token == nullptr ||
      combine.source == nullptr || combine.weight == nullptr || combine.residual == nullptr ||
      combine.out == nullptr || combine.arrivals == nullptr ||
      down.shape.n_padded / SliceDownCombine::kRows != w4a16_grouped_combine_slices(down.shape.n))
    return cudaErrorInvalidValue;
  return with_expert_shape<SliceDownCombine>(
      down.shape.format, combine.clamped_swiglu, [&](auto s) {
        using S = decltype(s);
        return block_rows > 8
                   ? launch_down_combine<S, 2, false>(x, down, blocks, max_blocks, expert_out,
                                                      stream, combine, overlap)
                   : launch_down_combine<S, 1, false>(x, down, blocks, max_blocks, expert_out,
                                                      stream, combine, overlap);
      });
}

namespace {
bool route_ok(const W4A16GroupedRoute& r) {
  return r.logits != nullptr && r.experts >= 1 && r.experts <= kMoeMaxExperts && r.k >= 1 &&
         r.k <= r.experts && r.k <= kMoeMaxTopK;
}
}  // namespace

cudaError_t w4a16_grouped_gate_up_silu_routed(const std::uint16_t* x,
                                              const W4A16GroupedWeights& gate_up,
                                              const W4A16GroupedRoute& route, std::uint16_t* middle,
                                              cudaStream_t stream, bool overlap,
                                              const W4A16ClampedSwiglu* clamped_swiglu) {
  const MoeRouting& o = route.out;
  if (!route_ok(route) || gate_up.shape.n % 32 != 0 || gate_up.table == nullptr ||
      o.expert == nullptr || o.weight == nullptr || o.counts == nullptr || o.offsets == nullptr ||
      o.token == nullptr || o.source == nullptr || o.blocks == nullptr || route.clear_count < 0 ||
      (route.clear_count > 0 && route.clear == nullptr))
    return cudaErrorInvalidValue;
  W4A16GroupedCombine fuse;
  fuse.route = route;
  fuse.clamped_swiglu = clamped_swiglu != nullptr;
  if (clamped_swiglu != nullptr) fuse.swiglu = *clamped_swiglu;
  // Every pick is its own row block of one row: k block rows (the table launch's max_blocks).
  return with_expert_shape<SliceGateUpSilu>(gate_up.shape.format, fuse.clamped_swiglu, [&](auto s) {
    return launch_gate_up_silu<decltype(s), 1, true>(x, gate_up, nullptr, route.k, middle, stream,
                                                     fuse, overlap);
  });
}

cudaError_t w4a16_grouped_down_combine_routed(const std::uint16_t* x,
                                              const W4A16GroupedWeights& down,
                                              const W4A16GroupedCombine& combine,
                                              std::uint16_t* expert_out, cudaStream_t stream,
                                              bool overlap) {
  if (!route_ok(combine.route) || down.table == nullptr || combine.residual == nullptr ||
      combine.out == nullptr || combine.arrivals == nullptr ||
      down.shape.n_padded / SliceDownCombine::kRows != w4a16_grouped_combine_slices(down.shape.n))
    return cudaErrorInvalidValue;
  W4A16GroupedCombine fuse = combine;
  fuse.k = combine.route.k;
  return with_expert_shape<SliceDownCombine>(
      down.shape.format, combine.clamped_swiglu, [&](auto s) {
        return launch_down_combine<decltype(s), 1, true>(x, down, nullptr, combine.route.k,
                                                         expert_out, stream, fuse, overlap);
      });
}

}  // namespace nibble::kernels
