#include "engine/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <thread>

#include "engine/backend/batch_checks.h"
#include "engine/backend/cpu/cpu_forward.h"
#include "engine/backend/cpu/cpu_kv_cache.h"
#include "engine/backend/decoder_forward.h"
#include "engine/backend/kv_layer_groups.h"
#include "engine/backend/linear_attention_shape.h"
#include "engine/runtime/thread_pool.h"

namespace nibble::backend {
namespace {

using cpu::CpuKvCache;
using cpu::ThreadPool;
using model::ModelConfig;

class CpuBackend : public Backend {
 public:
  CpuBackend(model::ModelWeights w, int threads)
      : w_(std::move(w)),
        description_(model::describe_model(w_.config)),
        groups_(kv_layer_groups(description_)),
        pool_(threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()))),
        inv_freq_(cpu::rope_inverse_frequencies(w_.config.rope, w_.config.rope_dim())) {
    if (w_.config.mtp_module && !w_.mtp)
      throw BackendError(
          "cpu backend: an MTP module's model without its input weights (fc, "
          "norms): make it with model::take_mtp_module");
    if (w_.config.eagle3 && !w_.eagle3)
      throw BackendError(
          "cpu backend: an EAGLE-3 head without its fc: load it with model::load_eagle3_head");
    for (int l : w_.config.hidden_state_layers)
      if (l < 0 || l >= w_.config.num_layers)
        throw BackendError("cpu backend: hidden_state_layers names layer " + std::to_string(l) +
                           " of a model of " + std::to_string(w_.config.num_layers) + " layers");
  }

  std::string name() const override { return "cpu"; }
  std::string kv_cache_dtype() const override { return "fp32"; }
  bool logits_at_several_positions() const override { return true; }
  bool returns_hidden_states() const override { return true; }
  const ModelConfig& config() const override { return w_.config; }

  // Only attention layers keep keys and values; a block holds one group's.
  std::size_t kv_block_bytes(int block_size) const override {
    const auto& c = w_.config;
    return std::size_t(groups_.layers_per_block) * 2 * std::size_t(block_size) *
           std::size_t(c.num_kv_heads) * std::size_t(c.head_dim) * sizeof(float);
  }
  int kv_sliding_window() const override { return groups_.sliding_window; }

  std::size_t state_slot_bytes() const override {
    return state_slot_floats(description_) * sizeof(float);
  }

  std::unique_ptr<KvCache> new_kv_cache(int num_blocks, int block_size) override {
    return new_kv_cache_with_state(num_blocks, block_size, 0);
  }

  std::unique_ptr<KvCache> new_kv_cache_with_state(int num_blocks, int block_size,
                                                   int state_slots) override {
    if (num_blocks < 1 || block_size < 1)
      throw BackendError("cpu backend: a KV cache needs at least one block of one position");
    if (state_slots < 0 || (state_slots > 0 && !description_.has_recurrent_state()))
      throw BackendError("cpu backend: " + w_.config.architecture + " keeps no recurrent state; " +
                         std::to_string(state_slots) + " state slots asked for");
    return std::make_unique<CpuKvCache>(w_.config, description_, groups_, num_blocks, block_size,
                                        state_slots, this);
  }

  void forward_batch(KvCache& kv, std::span<const BatchItem> items) override {
    auto* cache = dynamic_cast<CpuKvCache*>(&kv);
    if (!cache || cache->owner != this)
      throw BackendError("cpu backend: KV cache belongs to another backend");
    // Validate everything before touching the cache, so a bad call changes nothing.
    if (check_batch(w_.config, "cpu", *cache, items, false, true, true) == 0) return;
    check_state_slots("cpu", *cache, items, description_.has_recurrent_state());
    cache->prepare_state_slots(items);  // rolls back past rejected drafts
    cpu::CpuForward step(w_, inv_freq_, *cache, items, pool_);
    run_decoder(description_, step);
    cache->advance_state_slots(items);
  }

 private:
  model::ModelWeights w_;
  model::ModelDescription description_;
  KvLayerGroups groups_;
  ThreadPool pool_;
  std::vector<double> inv_freq_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(model::ModelWeights weights, int threads) {
  return std::make_unique<CpuBackend>(std::move(weights), threads);
}

}  // namespace nibble::backend
