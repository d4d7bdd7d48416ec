#include "engine/backend/cuda/forward_pass.h"

#include <cmath>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/swiglu_block.h"
#include "engine/backend/decoder_forward.h"
#include "engine/backend/kv_layer_groups.h"
#include "engine/backend/linear_attention_shape.h"
#include "kernels/layer/layer_ops.h"

namespace nibble::backend::cuda {

// The ops of one step: the per-step arguments of the RoPE / KV store and attention kernels set
// once, each layer pointing them at its cache and weights.
class CudaStepOps : public DecoderOps {
 public:
  CudaStepOps(ForwardPass& f, DeviceKvCache& cache, const StepInputs& in, const StepShape& step)
      : f_(f), c_(f.m_.config), act_(f.buffers_.act), cache_(cache), in_(in), step_(step) {
    rope_.positions = in.positions;
    rope_.slots = in.slots;
    rope_.inv_freq = f.m_.inv_freq.get();
    rope_.eps = c_.rms_norm_eps;
    rope_.tokens = int(step.rows);
    rope_.q_heads = c_.num_heads;
    rope_.kv_heads = c_.num_kv_heads;
    rope_.head_dim = c_.head_dim;
    rope_.rotary_dim = c_.rope_dim();
    rope_.attention_factor = float(c_.rope.attention_factor);  // YaRN's; 1 otherwise
    rope_.q_out = act_.q.get();
    attention_.block_tables = in.block_tables;
    attention_.block_size = cache.block;
    attention_.tiles = in.tiles;
    attention_.num_tiles = step.tiles;
    attention_.shape = f.shape_;
    attention_.scale = 1.0f / std::sqrt(float(c_.head_dim));
    attention_.rows = int(step.rows);
    attention_.sm_count = f.sm_count_;
    attention_.splits = step.splits;
    attention_.workspace = f.buffers_.attention_work.get();
    attention_.workspace_floats = f.buffers_.attention_work.size();
    attention_.decode_tiles = in.decode_tiles;
    attention_.q = act_.q.get();
    attention_.out = act_.attn.get();
    attention_.options = f.attention_;
  }

  void embed() override {
    check(kernels::embed_rows(f_.m_.embed.get(), in_.tokens, int(step_.rows), c_.hidden_size,
                              act_.x.get(), f_.stream_),
          "embed_rows");
    mark("embed");
  }

  // An MTP module's input: x = fc([norm(embedding), norm(hidden_in)]), the two normed halves
  // side by side in act.pair (as the CPU backend's embed_with_hidden). act.hidden_in holds the
  // items' hidden_in rows (the backend uploaded them).
  void embed_with_hidden(model::NormKind norm) override {
    const DeviceMtpInput& mtp = *f_.m_.mtp;
    const std::int64_t T = step_.rows;
    embed();
    normalize(norm, act_.x.get(), mtp.embedding_norm.get());
    normalize(norm, act_.hidden_in.get(), mtp.hidden_norm.get(), act_.x2.get());
    side_by_side(act_.h.get(), act_.x2.get());
    f_.linears_.run(mtp.fc, act_.pair.get(), T, nullptr, act_.x.get());
    mark("mtp input");
  }

  // An EAGLE-3 head's input (as the CPU backend's eagle3_input): x = the items' hidden_in rows,
  // through fc where they are the target's (StepInputs::hidden_in_runs say which rows are); the
  // embeddings wait in act.embedding for the first layer's attention.
  void eagle3_input() override {
    const std::int64_t H = c_.hidden_size;
    check(kernels::embed_rows(f_.m_.embed.get(), in_.tokens, int(step_.rows), c_.hidden_size,
                              act_.embedding.get(), f_.stream_),
          "embed_rows");
    for (const HiddenInRun& run : in_.hidden_in_runs) {
      std::uint16_t* x = act_.x.get() + run.row0 * H;
      const std::uint16_t* rows = act_.hidden_in.get() + run.offset;
      if (run.width == H) {
        check(cudaMemcpyAsync(x, rows, std::size_t(run.rows * H) * sizeof(std::uint16_t),
                              cudaMemcpyDeviceToDevice, f_.stream_),
              "copying the EAGLE-3 input");
      } else {
        f_.linears_.run(*f_.m_.eagle3_fc, rows, run.rows, nullptr, x);
      }
    }
    mark("eagle3 input");
  }

  // Before a layer of hidden_state_layers: x (the layer's input) into column block `index` of
  // act.kept, read back after the step (one strided copy, captured in decode graphs too).
  void keep_hidden_state(int index) override {
    const std::size_t row = std::size_t(c_.hidden_size) * sizeof(std::uint16_t);
    const std::size_t width = std::size_t(c_.hidden_state_width()) * sizeof(std::uint16_t);
    check(cudaMemcpy2DAsync(act_.kept.get() + std::int64_t(index) * c_.hidden_size, width,
                            act_.x.get(), row, row, std::size_t(step_.rows),
                            cudaMemcpyDeviceToDevice, f_.stream_),
          "keeping a hidden state");
  }

  // x2 = x + o(attention(rope(q, k), v)), q, k, v projected from norm(x); with an output gate
  // (Qwen3-Next) q_proj yields each head's query then its gate, and the attention output is
  // multiplied by sigmoid(gate) before o. gpt-oss: biases on q, k, v and o (with the linears),
  // sink logits and a sliding window per layer (the attention kernels'), YaRN (inv_freq and the
  // attention factor of rope_and_store_kv).
  void attention(int l, model::NormKind norm, const model::AttentionSpec& spec) override {
    const DeviceLayer& w = f_.m_.layers[std::size_t(l)];
    const std::int64_t T = step_.rows, D = c_.head_dim;
    const std::int64_t q_per_head = spec.output_gate ? 2 * D : D;
    const std::int64_t q_width = std::int64_t(c_.num_heads) * q_per_head,
                       kv_width = std::int64_t(c_.num_kv_heads) * D;
    // q, k and v read in = norm(x), or EAGLE-3's two normed halves (2 H a row).
    const std::uint16_t* in = act_.h.get();
    if (spec.reads_embedding) {
      in = eagle3_attention_input(norm, w, spec);
    } else {
      normalize(norm, act_.x.get(), w.input_norm.get());
    }
    // The q / k / v biases (spec.qkv_bias) ride with the projections' weights.
    if (w.fused_qkv) {
      f_.linears_.run(w.qkv, in, T, nullptr, act_.qkv.get());
      rope_.q_in = act_.qkv.get();
      rope_.k = act_.qkv.get() + q_width;
      rope_.v = act_.qkv.get() + q_width + kv_width;
      rope_.q_stride = rope_.kv_stride = q_width + 2 * kv_width;
    } else {
      // A gated q goes to act.qkv: the rotated queries (act.q) cannot overwrite it in place.
      std::uint16_t* q = spec.output_gate ? act_.qkv.get() : act_.q.get();
      f_.linears_.run(w.q, in, T, nullptr, q);
      f_.linears_.run(w.k, in, T, nullptr, act_.k.get());
      f_.linears_.run(w.v, in, T, nullptr, act_.v.get());
      rope_.q_in = q;
      rope_.k = act_.k.get();
      rope_.v = act_.v.get();
      rope_.q_stride = q_width;
      rope_.kv_stride = kv_width;
    }
    rope_.q_head_stride = int(q_per_head);
    mark("norm+qkv");
    rope_.q_norm = spec.qk_norm ? w.q_norm.get() : nullptr;
    rope_.k_norm = spec.qk_norm ? w.k_norm.get() : nullptr;
    // A sliding-group layer stores and reads its keys through the window tables.
    const bool sliding = cache_.sliding(l);
    rope_.slots = sliding ? in_.window_slots : in_.slots;
    attention_.tiles = sliding ? in_.window_tiles : in_.tiles;
    cache_.point_at_layer(l, rope_);
    check(kernels::rope_and_store_kv(rope_, f_.stream_, f_.layer_), "rope_and_store_kv");
    mark("rope+kv store");
    cache_.point_at_layer(l, attention_);
    // gpt-oss: the layer's sink logits and window (0: full attention); a sliding layer reads
    // only its window's keys and table entries (those before it may have gone back to the pool).
    attention_.sinks = spec.sinks ? w.sinks.get() : nullptr;
    attention_.window = spec.sliding_window;
    check(kernels::paged_attention(attention_, f_.stream_), "paged_attention");
    mark("attention");
    if (spec.output_gate) {
      check(kernels::sigmoid_gate_heads(act_.attn.get(), rope_.q_in + D, int(T), c_.num_heads,
                                        int(D), rope_.q_stride, q_per_head, f_.stream_),
            "sigmoid_gate_heads");
      mark("output gate");
    }
    f_.linears_.run(w.o, act_.attn.get(), T, act_.x.get(), act_.x2.get());
    mark("o");
  }

  // x2 = x + out_proj(Gated DeltaNet mixing of in_proj_qkvz(h), in_proj_ba(h)), h = norm(x),
  // each sequence's conv window and delta-rule state read and advanced in its state slot
  // (StepInputs::state_rows, one row per sequence; long rows through the chunked form).
  void gated_deltanet(int l, model::NormKind norm,
                      const model::LinearAttentionSpec& spec) override {
    const DeviceLayer& w = f_.m_.layers[std::size_t(l)];
    const DeviceLinearAttention& la = w.linear_attention;
    const std::int64_t T = step_.rows;
    normalize(norm, act_.x.get(), w.input_norm.get());
    f_.linears_.run(la.in_proj_qkvz, act_.h.get(), T, nullptr, act_.qkvz.get());
    f_.linears_.run(la.in_proj_ba, act_.h.get(), T, nullptr, act_.ba.get());
    mark("norm+in_proj");
    const kernels::GatedDeltaNetDeviceParams params{
        la.conv_weight.get(), la.A_log.get(), la.dt_bias.get(), la.norm.get(), c_.rms_norm_eps};
    // Long rows (prompt chunks) through the chunked form, the rest (decode) the recurrent one.
    const kernels::GatedDeltaNetStepRows rows{in_.state_rows, in_.num_state_rows, T,
                                              in_.longest_state_row};
    check(kernels::gated_deltanet_mix_step(
              deltanet_shape(spec), rows, act_.qkvz.get(), act_.ba.get(), params,
              cache_.state(l, in_.snapshots), {act_.deltanet_work.get(), act_.deltanet_work.size()},
              act_.mixed.get(), f_.stream_, f_.deltanet_chunked_min_tokens_),
          "gated_deltanet_mix_step");
    mark("gated deltanet");
    f_.linears_.run(la.out_proj, act_.mixed.get(), T, act_.x.get(), act_.x2.get());
    mark("out_proj");
  }

  // x = x2 + down(silu(gate(h)) * up(h)), h = norm(x2).
  void mlp(int l, model::NormKind norm, const model::MlpSpec&) override {
    const DeviceLayer& w = f_.m_.layers[std::size_t(l)];
    normalize(norm, act_.x2.get(), w.post_attention_norm.get());
    run_swiglu(f_.linears_, w.mlp, act_.h.get(), step_.rows, act_.x2.get(), act_.x.get(),
               act_.gate.get(), act_.up.get(), f_.stream_, f_.layer_);
    mark("norm+mlp");
  }

  // x = x2 + experts(h), h = norm(x2); with a shared expert (Qwen3-Next) also
  // + sigmoid(shared_expert_gate(h)) * shared_expert(h), per token.
  void moe(int l, model::NormKind norm, const model::MoeSpec& spec) override {
    const DeviceLayer& w = f_.m_.layers[std::size_t(l)];
    const std::int64_t T = step_.rows;
    normalize(norm, act_.x2.get(), w.post_attention_norm.get());
    f_.moe_.run(w, spec, T, act_, c_.hidden_size);
    mark("norm+moe");
    if (spec.shared_expert_intermediate_size == 0) return;
    // The routed experts are done with the MoE buffers: the shared expert's output goes to
    // act.expert_out, its gate's FP32 scores to act.router.
    run_swiglu(f_.linears_, w.shared, act_.h.get(), T, nullptr, act_.expert_out.get(),
               act_.gate.get(), act_.up.get(), f_.stream_, f_.layer_);
    f_.linears_.run_float(w.shared_expert_gate, act_.h.get(), T, act_.router.get(), act_.scratch);
    check(kernels::add_sigmoid_scaled_rows(act_.x.get(), act_.expert_out.get(), act_.router.get(),
                                           int(T), c_.hidden_size, f_.stream_),
          "add_sigmoid_scaled_rows");
    mark("shared expert");
  }

  void logits(model::NormKind norm) override {
    // An MTP module hands out its output after its final norm (the chained drafts' input):
    // every row's, into act.h, read back after the step (CudaBackend).
    if (c_.mtp_module) normalize(norm, act_.x.get(), f_.m_.final_norm.get());
    const std::int64_t R = step_.sampled;
    if (R == 0) return;
    // The sampled rows' last hidden states, gathered and normed in one launch.
    switch (norm) {
      case model::NormKind::kRms:
        check(kernels::rms_norm_rows(act_.x.get(), in_.logit_rows, f_.m_.final_norm.get(), int(R),
                                     c_.hidden_size, c_.rms_norm_eps, act_.last.get(), f_.stream_,
                                     f_.layer_),
              "rms_norm_rows");
        break;
      case model::NormKind::kRmsZeroCentred:  // folded at load (DeviceModel::description)
        throw BackendError("cuda backend: a zero-centred RMSNorm was not folded at load");
    }
    // Logits through BF16, as vLLM computes them: cuBLAS's BF16 matrix-vector path is its
    // fastest for the lm_head (the widest matrix of the model).
    f_.linears_.run(f_.m_.lm_head, act_.last.get(), R, nullptr, act_.scratch.get());
    check(kernels::bf16_to_float(act_.scratch.get(), R * c_.logits_size(), act_.logits.get(),
                                 f_.stream_),
          "bf16_to_float");
    mark("final norm+lm_head");
  }

 private:
  // EAGLE-3's first layer: [input_norm(embedding), hidden_norm(x)] side by side in act.pair (as
  // the CPU backend's attention); with norm_before_residual the normed x is the residual too.
  const std::uint16_t* eagle3_attention_input(model::NormKind norm, const DeviceLayer& w,
                                              const model::AttentionSpec& spec) {
    const std::int64_t T = step_.rows, H = c_.hidden_size;
    normalize(norm, act_.embedding.get(), w.input_norm.get());
    normalize(norm, act_.x.get(), w.hidden_norm.get(), act_.x2.get());
    side_by_side(act_.h.get(), act_.x2.get());
    if (spec.norm_before_residual)
      check(cudaMemcpyAsync(act_.x.get(), act_.x2.get(), std::size_t(T * H) * sizeof(std::uint16_t),
                            cudaMemcpyDeviceToDevice, f_.stream_),
            "the normed residual");
    return act_.pair.get();
  }

  // act.pair [T, 2 H] = [left, right], each [T, H]: two strided copies.
  void side_by_side(const std::uint16_t* left, const std::uint16_t* right) {
    const std::size_t row = std::size_t(c_.hidden_size) * sizeof(std::uint16_t);
    const auto T = std::size_t(step_.rows);
    check(cudaMemcpy2DAsync(act_.pair.get(), 2 * row, left, row, row, T, cudaMemcpyDeviceToDevice,
                            f_.stream_),
          "concatenating two rows");
    check(cudaMemcpy2DAsync(act_.pair.get() + c_.hidden_size, 2 * row, right, row, row, T,
                            cudaMemcpyDeviceToDevice, f_.stream_),
          "concatenating two rows");
  }

  // out (act.h unless given) = norm(in) with weight w over the step's rows.
  void normalize(model::NormKind norm, const std::uint16_t* in, const float* w,
                 std::uint16_t* out = nullptr) {
    switch (norm) {
      case model::NormKind::kRms:
        check(kernels::rms_norm(in, w, int(step_.rows), c_.hidden_size, c_.rms_norm_eps,
                                out != nullptr ? out : act_.h.get(), f_.stream_, f_.layer_),
              "rms_norm");
        break;
      case model::NormKind::kRmsZeroCentred:  // folded at load (DeviceModel::description)
        throw BackendError("cuda backend: a zero-centred RMSNorm was not folded at load");
    }
  }
  void mark(const char* phase) {
    if (step_.timed) f_.timer_.mark(phase);
  }

  ForwardPass& f_;
  const model::ModelConfig& c_;
  Activations& act_;
  DeviceKvCache& cache_;
  const StepInputs& in_;
  const StepShape& step_;
  kernels::RopeStoreArgs rope_;
  kernels::PagedAttentionArgs attention_;
};

ForwardPass::ForwardPass(const DeviceModel& model, LinearRunner& linears, MoeBlock& moe,
                         StepBuffers& buffers, StepTimer& timer, cudaStream_t stream, int sm_count,
                         const CudaOptions& options)
    : m_(model),
      description_(model.description),
      linears_(linears),
      moe_(moe),
      buffers_(buffers),
      timer_(timer),
      stream_(stream),
      sm_count_(sm_count),
      attention_(options.attention),
      deltanet_chunked_min_tokens_(options.deltanet_chunked_min_tokens > 0
                                       ? options.deltanet_chunked_min_tokens
                                       : kernels::kGatedDeltaChunkedMinTokens),
      layer_(options.layer),
      shape_{model.config.num_heads, model.config.num_kv_heads, model.config.head_dim},
      rows_per_tile_(kernels::attention_rows_per_tile(shape_, attention_)),
      sliding_window_(kv_layer_groups(description_).sliding_window) {}

void ForwardPass::enqueue(DeviceKvCache& cache, const StepInputs& in, const StepShape& step) {
  CudaStepOps ops(*this, cache, in, step);
  run_decoder(description_, ops);
}

}  // namespace nibble::backend::cuda
