#pragma once
// The CUDA backend's paged KV cache. Per layer: K then V, each [(num_blocks + 1) * block_size,
// Hkv, D] BF16, in one allocation; or, with an FP8 cache (kernels/attention/kv_fp8_ref.h), K
// codes, V codes [rows, Hkv, D] E4M3 then K scales, V scales [rows, Hkv] BF16. The block after
// the last one the engine may use is scratch: the rows that pad a decode step up to its graph's
// size write their keys and values there. A cache owns the decode graphs captured against its
// storage (decode_graphs.h).
#include <cstddef>
#include <cstdint>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/decode_graphs.h"
#include "engine/backend/cuda/device_buffer.h"

namespace nibble::backend::cuda {

class DeviceKvCache : public KvCache {
 public:
  using bf16 = std::uint16_t;

  DeviceKvCache(const model::ModelConfig& c, int num_blocks, int block_size, bool fp8,
                const void* owner)
      : owner(owner),
        blocks(num_blocks),
        block(block_size),
        fp8(fp8),
        row_elems(std::size_t(num_blocks + 1) * std::size_t(block_size) *
                  std::size_t(c.num_kv_heads) * std::size_t(c.head_dim)),
        scale_elems(std::size_t(num_blocks + 1) * std::size_t(block_size) *
                    std::size_t(c.num_kv_heads)),
        layer_bytes(layer_bytes_for(row_elems, scale_elems, fp8)),
        storage(layer_bytes * std::size_t(c.num_layers)) {
    // Padding rows read the scratch block too: keep what they compute finite.
    check(cudaMemset(storage.get(), 0, storage.size()), "clearing the KV cache");
  }
  int num_blocks() const override { return blocks; }
  int block_size() const override { return block; }
  int scratch_block() const { return blocks; }
  std::byte* layer(int l) const { return storage.get() + layer_bytes * std::size_t(l); }
  bf16* k(int l) const { return fp8 ? nullptr : reinterpret_cast<bf16*>(layer(l)); }
  bf16* v(int l) const { return fp8 ? nullptr : k(l) + row_elems; }
  std::uint8_t* k8(int l) const {
    return fp8 ? reinterpret_cast<std::uint8_t*>(layer(l)) : nullptr;
  }
  std::uint8_t* v8(int l) const { return fp8 ? k8(l) + row_elems : nullptr; }
  bf16* k_scale(int l) const { return fp8 ? reinterpret_cast<bf16*>(v8(l) + row_elems) : nullptr; }
  bf16* v_scale(int l) const { return fp8 ? k_scale(l) + scale_elems : nullptr; }

  // Points a kernel's argument struct (k_cache, v_cache, k_cache8, v_cache8, k_scale, v_scale)
  // at layer l's keys and values, BF16 or FP8.
  template <typename Args>
  void point_at_layer(int l, Args& args) const {
    args.k_cache = k(l);
    args.v_cache = v(l);
    args.k_cache8 = k8(l);
    args.v_cache8 = v8(l);
    args.k_scale = k_scale(l);
    args.v_scale = v_scale(l);
  }

  // Layers start 256-byte aligned (the kernels read 16-byte pieces).
  static std::size_t layer_bytes_for(std::size_t row_elems, std::size_t scale_elems, bool fp8) {
    const std::size_t bytes =
        fp8 ? 2 * row_elems + 2 * scale_elems * sizeof(bf16) : 2 * row_elems * sizeof(bf16);
    return (bytes + 255) / 256 * 256;
  }

  const void* owner;  // the backend that made it
  int blocks, block;
  bool fp8;
  std::size_t row_elems, scale_elems, layer_bytes;
  DeviceBuffer<std::byte> storage;
  DecodeGraphs graphs;  // captured against this storage
};

}  // namespace nibble::backend::cuda
