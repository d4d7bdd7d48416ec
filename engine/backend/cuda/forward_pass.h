#pragma once
// The CUDA backend's ops of the one forward pass (engine/backend/decoder_forward.h): enqueues a
// step's forward on the backend's stream with no allocation and, unless a MoE layer routes
// through the host, no host synchronisation, so that a decode graph captures exactly this.
// Activations ping-pong: attention reads act.x and writes act.x2, the MLP or MoE block reads
// act.x2 and writes act.x; the sampled rows' FP32 logits end in act.logits.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/backend/backend_options.h"
#include "engine/backend/cuda/device_kv_cache.h"
#include "engine/backend/cuda/device_linear.h"
#include "engine/backend/cuda/device_model.h"
#include "engine/backend/cuda/hidden_rows.h"
#include "engine/backend/cuda/moe_block.h"
#include "engine/backend/cuda/step_buffers.h"
#include "engine/backend/cuda/step_timer.h"
#include "engine/model/model_description.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/linear_attention/gated_deltanet.h"
#include "kernels/linear_attention/gated_deltanet_chunked.h"

namespace nibble::backend::cuda {

// Device addresses of one step's inputs (step_layout.h).
struct StepInputs {
  const std::int32_t* tokens = nullptr;
  const std::int32_t* positions = nullptr;
  const std::int64_t* slots = nullptr;
  const kernels::AttentionTile* tiles = nullptr;
  // The sliding block group's cache rows and tiles (step_layout.h; the same as slots and tiles
  // where the step has no window tables), for the layers DeviceKvCache::sliding says.
  const std::int64_t* window_slots = nullptr;
  const kernels::AttentionTile* window_tiles = nullptr;
  const std::int32_t* block_tables = nullptr;
  const std::int32_t* logit_rows = nullptr;
  int decode_tiles = -1;  // attention tiles of one row, -1: unknown (paged_attention.h)
  // Hybrid models: the step's Gated DeltaNet rows (one per sequence), how many, and the longest
  // row's token count (0: unknown, every row then runs the recurrent form; rows of at least
  // kernels::kGatedDeltaChunkedMinTokens take the chunked form).
  const kernels::GatedDeltaNetRow* state_rows = nullptr;
  int num_state_rows = 0;
  bool snapshots = false;  // some rows are verify rows keeping snapshots (eager steps only)
  int longest_state_row = 0;
  // An EAGLE-3 head's hidden_in rows (eager steps only); an MTP module's are [T, H] as they are.
  std::span<const HiddenInRun> hidden_in_runs;
};

// The step's inputs inside one device blob at `at`'s offsets (step_layout.h: PackedStep for an
// eager step, DecodeStepOffsets for a decode graph's fixed addresses).
template <class Offsets>
StepInputs step_inputs_at(const std::byte* blob, const Offsets& at) {
  StepInputs in;
  in.tokens = reinterpret_cast<const std::int32_t*>(blob + at.tokens);
  in.positions = reinterpret_cast<const std::int32_t*>(blob + at.positions);
  in.slots = reinterpret_cast<const std::int64_t*>(blob + at.slots);
  in.tiles = reinterpret_cast<const kernels::AttentionTile*>(blob + at.tiles);
  in.window_slots = reinterpret_cast<const std::int64_t*>(blob + at.window_slots);
  in.window_tiles = reinterpret_cast<const kernels::AttentionTile*>(blob + at.window_tiles);
  in.block_tables = reinterpret_cast<const std::int32_t*>(blob + at.block_tables);
  in.logit_rows = reinterpret_cast<const std::int32_t*>(blob + at.logit_rows);
  in.state_rows = reinterpret_cast<const kernels::GatedDeltaNetRow*>(blob + at.state_rows);
  return in;
}

// One step's size: T rows, R of them sampled, its attention tiles and key splits.
struct StepShape {
  std::int64_t rows = 0, sampled = 0;
  int tiles = 0, splits = 1;
  bool timed = false;  // StepTimer marks between the phases (not inside a graph capture)
};

class ForwardPass {
 public:
  ForwardPass(const DeviceModel& model, LinearRunner& linears, MoeBlock& moe, StepBuffers& buffers,
              StepTimer& timer, cudaStream_t stream, int sm_count, const CudaOptions& options);

  const model::ModelConfig& config() const { return m_.config; }
  const model::ModelDescription& description() const { return description_; }
  const kernels::AttentionShape& attention_shape() const { return shape_; }
  const kernels::AttentionOptions& attention_options() const { return attention_; }
  int rows_per_tile() const { return rows_per_tile_; }
  // The sliding block group's window (kv_layer_groups.h); 0: one group.
  int sliding_window() const { return sliding_window_; }

  void enqueue(DeviceKvCache& cache, const StepInputs& in, const StepShape& step);

 private:
  friend class CudaStepOps;
  const DeviceModel& m_;
  model::ModelDescription description_;
  LinearRunner& linears_;
  MoeBlock& moe_;
  StepBuffers& buffers_;
  StepTimer& timer_;
  cudaStream_t stream_;
  int sm_count_;
  kernels::AttentionOptions attention_;
  int deltanet_chunked_min_tokens_;  // CudaOptions::deltanet_chunked_min_tokens, resolved
  kernels::LayerOptions layer_;
  kernels::AttentionShape shape_;
  int rows_per_tile_ = 1;
  int sliding_window_ = 0;
};

}  // namespace nibble::backend::cuda
