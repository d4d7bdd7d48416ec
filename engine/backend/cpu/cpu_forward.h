#pragma once
// The CPU backend's ops (decoder_forward.h) for one step: FP32 activations [T, H] for the
// step's rows, the paged cache written through the items' block tables, logits copied into the
// items that want them. The reference every GPU op is checked against.
#include <span>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/cpu_kv_cache.h"
#include "engine/backend/cpu/cpu_ops.h"
#include "engine/backend/decoder_forward.h"
#include "engine/model/model_weights.h"

namespace nibble::backend::cpu {

class CpuForward : public DecoderOps {
 public:
  // items: the step, already checked (batch_checks.h). inv_freq: the model's RoPE frequencies.
  CpuForward(const model::ModelWeights& weights, std::span<const double> inv_freq,
             CpuKvCache& cache, std::span<const BatchItem> items, ThreadPool& pool);

  void embed() override;
  void embed_with_hidden(model::NormKind norm) override;
  void eagle3_input() override;
  void keep_hidden_state(int index) override;
  void attention(int layer, model::NormKind norm, const model::AttentionSpec& spec) override;
  void gated_deltanet(int layer, model::NormKind norm,
                      const model::LinearAttentionSpec& spec) override;
  void mlp(int layer, model::NormKind norm, const model::MlpSpec& spec) override;
  void moe(int layer, model::NormKind norm, const model::MoeSpec& spec) override;
  // Also writes the items' hidden_out rows (backend.h).
  void logits(model::NormKind norm) override;

 private:
  struct Row {
    const BatchItem* item;
    int position;
  };
  // h = norm(x) with weight w, row by row.
  std::vector<float> normed(model::NormKind norm, std::span<const float> w) const;
  // x[rows, dim] normalised in place by a norm of kind `norm` with weight w.
  void norm_rows(model::NormKind norm, std::span<float> x, std::int64_t dim,
                 std::span<const float> w) const;
  // down(silu(gate(x)) * up(x)) for the rows of x.
  std::vector<float> swiglu(const model::Linear& gate, const model::Linear& up,
                            const model::Linear& down, std::span<const float> x, std::int64_t rows);
  // down(clamped_swiglu_value(gate, up)) for the rows of x, gate and up interleaved in gate_up.
  std::vector<float> clamped_swiglu(const model::Linear& gate_up, const model::Linear& down,
                                    const model::MoeSpec& spec, std::span<const float> x,
                                    std::int64_t rows);

  const model::ModelWeights& w_;
  std::span<const double> inv_freq_;
  CpuKvCache& cache_;
  std::span<const BatchItem> items_;
  ThreadPool& pool_;
  std::vector<Row> rows_;         // row t of the step: its item and its position in that sequence
  std::vector<float> x_;          // [T, H] the residual stream
  std::vector<float> embedding_;  // [T, H] the tokens' embeddings (an EAGLE-3 head's input)
  // [T, hidden_state_layers * H] the kept layers' inputs, row by row (keep_hidden_state)
  std::vector<float> kept_;
};

}  // namespace nibble::backend::cpu
