#pragma once
// The CUDA backend's paged KV cache. Per attention layer of a block group (kv_layer_groups.h): K
// then V, each [(num_blocks + 1) * block_size, Hkv, D] BF16, in one allocation; or, with an FP8
// cache (kernels/attention/kv_fp8_ref.h), K codes, V codes [rows, Hkv, D] E4M3 then K scales, V
// scales [rows, Hkv] BF16. With two groups (gpt-oss's full and sliding layers) the i-th layer of
// each group shares the i-th array, as in the CPU backend's cache: a block belongs to one group
// at a time, the sliding layers reach theirs through BatchItem::window_block_table.
// The block after the last one the engine may use is scratch: the rows that pad a decode step up
// to its graph's size write their keys and values there. A hybrid model's linear-attention
// layers keep no keys or values; their recurrent states live in state slots beside the blocks,
// per such layer [slots + 1, (K - 1) * conv_dim] conv windows and [slots + 1, Vh, Dk, Dv]
// delta-rule states in FP32 (kernels/linear_attention/gated_deltanet.h), the slot after the last
// scratch for the padding rows as above. Speculative decoding's rollback: per such layer also
// [slots, max_snapshots, floats of one] snapshots of each, the states after each token of a
// slot's last verify step (the kernel's snapshot rows), restored when the slot's next step starts
// at an earlier accepted position (state_slot_positions.h); (k + 1) x state_slot_bytes a slot,
// sized up front where the backend knows k, else grown by the first verify step that needs more.
// A cache owns the decode graphs captured against its storage (decode_graphs.h); they never read
// the snapshots, so growing them retires no graph.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/decode_graphs.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/kv_layer_groups.h"
#include "engine/backend/linear_attention_shape.h"
#include "engine/backend/state_slot_positions.h"
#include "engine/model/model_description.h"
#include "kernels/linear_attention/gated_deltanet.h"

namespace nibble::backend::cuda {

class DeviceKvCache : public KvCache {
 public:
  using bf16 = std::uint16_t;

  DeviceKvCache(const model::ModelConfig& c, const model::ModelDescription& d, int num_blocks,
                int block_size, bool fp8, int state_slots, int snapshots, const void* owner)
      : owner(owner),
        blocks(num_blocks),
        block(block_size),
        fp8(fp8),
        slots(state_slots),
        groups(kv_layer_groups(d)),
        row_elems(std::size_t(num_blocks + 1) * std::size_t(block_size) *
                  std::size_t(c.num_kv_heads) * std::size_t(c.head_dim)),
        scale_elems(std::size_t(num_blocks + 1) * std::size_t(block_size) *
                    std::size_t(c.num_kv_heads)),
        layer_bytes(layer_bytes_for(row_elems, scale_elems, fp8)),
        storage(layer_bytes * std::size_t(groups.layers_per_block)) {
    // Padding rows read the scratch block too: keep what they compute finite.
    check(cudaMemset(storage.get(), 0, storage.size()), "clearing the KV cache");
    if (state_slots == 0) return;
    std::size_t floats = 0;
    states_.resize(d.layers.size());
    for (std::size_t l = 0; l < d.layers.size(); ++l) {
      if (d.layers[l].mixer != model::MixerKind::kGatedDeltaNet) continue;
      const kernels::GatedDeltaNetShape shape = deltanet_shape(d.layers[l].linear_attention);
      LayerStates& at = states_[l];
      at.conv_floats = std::size_t(shape.conv_state_floats());
      at.recurrent_floats = std::size_t(shape.heads.state_floats());
      at.conv = floats;
      floats += at.conv_floats * std::size_t(state_slots + 1);
      at.recurrent = floats;
      floats += at.recurrent_floats * std::size_t(state_slots + 1);
      at.snapshot_conv = snapshot_unit;
      snapshot_unit += at.conv_floats * std::size_t(state_slots);
      at.snapshot_recurrent = snapshot_unit;
      snapshot_unit += at.recurrent_floats * std::size_t(state_slots);
    }
    state_storage.ensure(floats);
    check(cudaMemset(state_storage.get(), 0, floats * sizeof(float)), "clearing the state slots");
    ensure_snapshots(snapshots, nullptr);
  }
  int num_blocks() const override { return blocks; }
  int block_size() const override { return block; }
  int num_state_slots() const override { return slots; }
  int sliding_window() const override { return groups.sliding_window; }
  // Whether layer l is in the sliding group (its rows and tiles: StepInputs::window_slots,
  // window_tiles).
  bool sliding(int l) const { return groups.sliding[std::size_t(l)]; }
  int scratch_block() const { return blocks; }
  int scratch_state_slot() const { return slots; }
  std::byte* layer(int l) const {
    return storage.get() + layer_bytes * std::size_t(groups.index[std::size_t(l)]);
  }

  // Linear-attention layer l's conv windows and delta-rule states, every slot's; with their
  // snapshots where `snapshots` (a step with verify rows: the kernel's snapshot form).
  kernels::GatedDeltaNetDeviceState state(int l, bool snapshots = false) const {
    const LayerStates& at = states_[std::size_t(l)];
    kernels::GatedDeltaNetDeviceState st{state_storage.get() + at.conv,
                                         state_storage.get() + at.recurrent};
    if (snapshots && max_snapshots > 0) {
      st.snapshot_conv = snapshot_storage.get() + at.snapshot_conv * std::size_t(max_snapshots);
      st.snapshot_recurrent =
          snapshot_storage.get() + at.snapshot_recurrent * std::size_t(max_snapshots);
      st.max_snapshots = max_snapshots;
    }
    return st;
  }
  // Room for `tokens` snapshots a slot, keeping those taken (copied on `stream`, which is then
  // waited for: the old area is freed). Returns whether it grew.
  bool ensure_snapshots(int tokens, cudaStream_t stream) {
    if (tokens <= max_snapshots || slots == 0) return false;
    DeviceBuffer<float> grown(snapshot_unit * std::size_t(tokens));
    const auto old = std::size_t(max_snapshots), now = std::size_t(tokens);
    for (const LayerStates& at : states_) {
      if (at.conv_floats == 0 || old == 0) continue;
      for (const auto& [offset, floats] : {std::pair{at.snapshot_conv, at.conv_floats},
                                           std::pair{at.snapshot_recurrent, at.recurrent_floats}})
        check(cudaMemcpy2DAsync(grown.get() + offset * now, now * floats * sizeof(float),
                                snapshot_storage.get() + offset * old, old * floats * sizeof(float),
                                old * floats * sizeof(float), std::size_t(slots),
                                cudaMemcpyDeviceToDevice, stream),
              "keeping the state snapshots");
    }
    if (old > 0) check(cudaStreamSynchronize(stream), "keeping the state snapshots");
    snapshot_storage = std::move(grown);
    max_snapshots = tokens;
    return true;
  }
  std::size_t snapshot_bytes() const { return snapshot_storage.size() * sizeof(float); }
  // Enqueues copies of `slot`'s snapshot j over its live states in every linear-attention layer:
  // the rollback to the position after the verify step's token j.
  void restore_state_slot(int slot, int j, cudaStream_t stream) const {
    const std::size_t kept = std::size_t(slot) * std::size_t(max_snapshots) + std::size_t(j);
    const std::size_t max = std::size_t(max_snapshots);
    for (const LayerStates& at : states_) {
      if (at.conv_floats == 0) continue;
      check(cudaMemcpyAsync(state_storage.get() + at.conv + std::size_t(slot) * at.conv_floats,
                            snapshot_storage.get() + at.snapshot_conv * max + kept * at.conv_floats,
                            at.conv_floats * sizeof(float), cudaMemcpyDeviceToDevice, stream),
            "restoring a state slot");
      check(cudaMemcpyAsync(
                state_storage.get() + at.recurrent + std::size_t(slot) * at.recurrent_floats,
                snapshot_storage.get() + at.snapshot_recurrent * max + kept * at.recurrent_floats,
                at.recurrent_floats * sizeof(float), cudaMemcpyDeviceToDevice, stream),
            "restoring a state slot");
    }
  }
  // Enqueues zeros over `slot`'s states in every linear-attention layer: a sequence starting at
  // position 0 (new, or recomputed after a preemption) starts from them.
  void zero_state_slot(int slot, cudaStream_t stream) const {
    for (const LayerStates& at : states_) {
      if (at.conv_floats == 0) continue;
      check(cudaMemsetAsync(state_storage.get() + at.conv + std::size_t(slot) * at.conv_floats, 0,
                            at.conv_floats * sizeof(float), stream),
            "zeroing a state slot");
      check(cudaMemsetAsync(
                state_storage.get() + at.recurrent + std::size_t(slot) * at.recurrent_floats, 0,
                at.recurrent_floats * sizeof(float), stream),
            "zeroing a state slot");
    }
  }
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
  int slots;  // state slots (hybrid models), the scratch slot after them
  KvLayerGroups groups;
  std::size_t row_elems, scale_elems, layer_bytes;
  DeviceBuffer<std::byte> storage;
  DeviceBuffer<float> state_storage;     // the state slots (empty without)
  DeviceBuffer<float> snapshot_storage;  // their snapshots (empty without speculation)
  int max_snapshots = 0;                 // snapshots a slot
  // Where each state slot's live state and snapshots stand after the steps enqueued so far.
  StateSlotPositions positions = StateSlotPositions(slots);
  DecodeGraphs graphs;  // captured against this storage

 private:
  // Where a linear-attention layer's states start in state_storage, one slot's floats of each
  // (0 for attention layers), and where its snapshots start in snapshot_storage, in units of
  // max_snapshots floats (the offset with one snapshot a slot).
  struct LayerStates {
    std::size_t conv = 0, recurrent = 0, conv_floats = 0, recurrent_floats = 0;
    std::size_t snapshot_conv = 0, snapshot_recurrent = 0;
  };
  std::vector<LayerStates> states_;  // per layer
  std::size_t snapshot_unit = 0;     // snapshot_storage's floats with one snapshot a slot
};

}  // namespace nibble::backend::cuda
