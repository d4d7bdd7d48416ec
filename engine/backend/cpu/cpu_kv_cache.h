#pragma once
// The CPU backend's paged KV cache: FP32 rows, per attention layer of a block group
// (kv_layer_groups.h) [num_blocks * block_size, Hkv * D] for keys and for values; block b holds
// positions [b * block_size, (b + 1) * block_size) of whichever sequence's block table names it.
// With two groups (gpt-oss's full and sliding layers) the i-th layer of each group shares the
// i-th array: a block belongs to one group at a time, so a block id is one group's block, and
// the cache takes num_blocks blocks of one group's layers, as kv_block_bytes counts. A hybrid
// model's linear-attention layers keep no keys or values; their recurrent state lives in state
// slots instead, per layer [slots, (K - 1) * conv_dim] conv windows and [slots, Vh * Dk * Dv]
// delta-rule states (kernels/linear_attention/gated_deltanet_shape.h).
//
// Speculative decoding's rollback of those states: a verify step (an item of several tokens with
// logits at several positions, BatchItem::num_logits > 1) keeps, per slot, the state after each
// of its tokens; the slot's next step starts at the accepted length, and the state kept for that
// position replaces the live one, so rejected drafts leave no trace. The backend sees the
// accepted count in the next step's start, so the interface needs no call of its own. Kept states
// are allocated at a slot's first verify step (never without speculation): at most
// (k + 1) x Backend::state_slot_bytes() a slot.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/kv_layer_groups.h"
#include "engine/backend/linear_attention_shape.h"
#include "engine/backend/state_slot_positions.h"
#include "engine/model/model_description.h"
#include "kernels/linear_attention/gated_deltanet_shape.h"

namespace nibble::backend::cpu {

class CpuKvCache : public KvCache {
 public:
  CpuKvCache(const model::ModelConfig& c, const model::ModelDescription& d,
             const KvLayerGroups& groups, int num_blocks, int block_size, int state_slots,
             const void* owner)
      : owner(owner),
        blocks(num_blocks),
        block(block_size),
        slots(state_slots),
        width(std::size_t(c.num_kv_heads) * std::size_t(c.head_dim)),
        groups(groups),
        positions_(state_slots),
        kept_(std::size_t(state_slots)) {
    const std::size_t rows = std::size_t(num_blocks) * std::size_t(block_size);
    k.resize(std::size_t(groups.layers_per_block));
    v.resize(std::size_t(groups.layers_per_block));
    for (auto& layer : k) layer.resize(rows * width);
    for (auto& layer : v) layer.resize(rows * width);
    conv.resize(d.layers.size());
    delta.resize(d.layers.size());
    for (std::size_t l = 0; l < d.layers.size(); ++l) {
      const model::LayerSpec& spec = d.layers[l];
      if (spec.mixer != model::MixerKind::kAttention) {
        const kernels::GatedDeltaNetShape s = deltanet_shape(spec.linear_attention);
        conv[l].resize(std::size_t(state_slots) * std::size_t(s.conv_state_floats()));
        delta[l].resize(std::size_t(state_slots) * std::size_t(s.heads.state_floats()));
      }
    }
  }
  int num_blocks() const override { return blocks; }
  int block_size() const override { return block; }
  int num_state_slots() const override { return slots; }
  int sliding_window() const override { return groups.sliding_window; }

  // Attention layer `layer`'s keys and values, and the block table of its group in `item`.
  std::vector<float>& keys(int layer) { return k[std::size_t(groups.index[std::size_t(layer)])]; }
  std::vector<float>& values(int layer) { return v[std::size_t(groups.index[std::size_t(layer)])]; }
  std::span<const int> table(const BatchItem& item, int layer) const {
    return groups.sliding[std::size_t(layer)] ? item.window_block_table : item.block_table;
  }

  // The cache row holding `position` of the sequence whose block table is `table`.
  std::int64_t slot(std::span<const int> table, int position) const {
    return std::int64_t(table[std::size_t(position / block)]) * block + position % block;
  }
  // A state slot's conv window and delta-rule state in linear-attention layer `layer`.
  std::span<float> conv_state(int layer, int state_slot) {
    return slice(conv[std::size_t(layer)], state_slot);
  }
  std::span<float> delta_state(int layer, int state_slot) {
    return slice(delta[std::size_t(layer)], state_slot);
  }

  // Whether `item` is a verify step whose states after each token are kept.
  static bool keeps_states(const BatchItem& item) { return StateSlotPositions::keeps_states(item); }
  // Before a step: checks that every item of a state slot starts at 0 (a fresh state), at the
  // position the slot's live state is at, or at a position the slot's last step kept (its
  // state then restored); sizes the kept states of verify items. Throws std::logic_error,
  // naming the slot and the positions, before changing anything.
  void prepare_state_slots(std::span<const BatchItem> items);
  // After a step: each item's slot is at start + tokens; a verify item's kept states are those
  // of positions start + 1 .. start + tokens, any other item's slot keeps none.
  void advance_state_slots(std::span<const BatchItem> items);
  // The kept conv window and delta-rule state after token j of the slot's verify item in
  // linear-attention layer `layer` (written by the step, sized by prepare_state_slots).
  std::span<float> kept_conv_state(int layer, int state_slot, int j);
  std::span<float> kept_delta_state(int layer, int state_slot, int j);
  // Bytes of kept states allocated so far, over all slots.
  std::size_t kept_state_bytes() const;

  const void* owner;  // the backend that made it
  int blocks, block, slots;
  std::size_t width;  // Hkv * D floats a row
  KvLayerGroups groups;
  std::vector<std::vector<float>> k, v;         // [layers_per_block]: a group's i-th layer
  std::vector<std::vector<float>> conv, delta;  // linear-attention layers (empty otherwise)

 private:
  // A slot's kept states, per layer [tokens, floats of one state] (empty for attention layers).
  struct KeptStates {
    std::vector<std::vector<float>> conv, delta;
  };
  static std::span<float> kept(std::vector<float>& layer, std::size_t floats, int j) {
    return std::span(layer).subspan(std::size_t(j) * floats, floats);
  }
  StateSlotPositions positions_;  // where each slot's live and kept states stand
  std::vector<KeptStates> kept_;  // [slots], sized at a slot's first verify step

  std::span<float> slice(std::vector<float>& all, int state_slot) const {
    const std::size_t n = all.size() / std::size_t(slots);
    return std::span(all).subspan(std::size_t(state_slot) * n, n);
  }
};

}  // namespace nibble::backend::cpu
