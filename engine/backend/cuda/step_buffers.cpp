#include "engine/backend/cuda/step_buffers.h"

#include <algorithm>

#include "kernels/linear_attention/gated_deltanet_chunked.h"
#include "kernels/moe/moe_experts.h"

namespace nibble::backend::cuda {

bool Activations::ensure(const model::ModelConfig& c, std::int64_t T, std::int64_t R) {
  const auto H = std::size_t(c.hidden_size), D = std::size_t(c.head_dim);
  const auto t = std::size_t(T), K = std::size_t(std::max(1, c.num_experts_per_tok));
  bool grew = false;
  auto grow = [&](auto& buffer, std::size_t n) {
    grew |= n > buffer.size();
    buffer.ensure(n);
  };
  for (auto* b : {&x, &x2, &h}) grow(*b, t * H);
  // Qwen3-Next's q_proj yields a gate beside each head's query.
  const std::size_t q_per_head = c.arch == model::Arch::Qwen3Next ? 2 * D : D;
  grow(q, t * std::size_t(c.num_heads) * q_per_head);
  grow(attn, t * std::size_t(c.num_heads) * D);
  grow(k, t * std::size_t(c.num_kv_heads) * D);
  grow(v, t * std::size_t(c.num_kv_heads) * D);
  grow(qkv, t * (std::size_t(c.num_heads) * q_per_head + 2 * std::size_t(c.num_kv_heads) * D));
  const std::size_t mlp =
      std::max({std::size_t(c.intermediate_size),
                c.num_experts > 0 ? K * std::size_t(c.moe_intermediate_size) : 0,
                std::size_t(c.shared_expert_intermediate_size)});
  grow(gate, t * 2 * mlp);  // a fused gate_up projection's output
  grow(up, t * mlp);        // the SwiGLU middle
  if (c.num_experts > 0) {
    grow(routed, t * K * H);
    grow(expert_out, t * K * H);
    grow(router, t * std::size_t(c.num_experts));
    grow(moe_routing, std::size_t(kernels::moe_routing_words(T, c.num_experts, int(K), 1)));
    const std::size_t arrival_words = moe_arrivals.size();
    grow(moe_arrivals, std::size_t(kernels::moe_arrival_words(T, c.hidden_size)));
    if (moe_arrivals.size() != arrival_words) {  // zeros before the first use (moe_experts.h)
      check(cudaMemset(moe_arrivals.get(), 0, moe_arrivals.size() * sizeof(std::int32_t)),
            "zeroing the MoE arrival counts");
      check(cudaDeviceSynchronize(), "zeroing the MoE arrival counts");
    }
  }
  if (std::find(c.linear_attention_layers.begin(), c.linear_attention_layers.end(), true) !=
      c.linear_attention_layers.end()) {
    const kernels::GatedDeltaNetShape shape{{c.linear_num_key_heads, c.linear_num_value_heads,
                                             c.linear_key_head_dim, c.linear_value_head_dim},
                                            c.linear_conv_kernel_dim};
    grow(qkvz, t * std::size_t(shape.qkvz_width()));
    grow(ba, t * std::size_t(shape.ba_width()));
    grow(mixed, t * std::size_t(shape.value_dim()));
    grow(deltanet_work, kernels::gated_deltanet_chunked_workspace_bytes(shape, T));
  }
  if (!c.hidden_state_layers.empty()) grow(kept, t * std::size_t(c.hidden_state_width()));
  if (c.mtp_module || c.eagle3) {
    const std::size_t widest_in = c.eagle3 ? std::max(H, std::size_t(c.eagle3->fc_inputs())) : H;
    grow(hidden_in, t * widest_in);
    grow(pair, t * 2 * H);
  }
  if (c.eagle3) grow(embedding, t * H);
  const auto rows = std::size_t(std::max<std::int64_t>(R, 1));
  grow(last, rows * H);
  grow(logits, rows * std::size_t(c.vocab_size));
  // Also the router's BF16 scores (run_float): sized here, so that no step grows it behind the
  // back of the graphs that read it.
  grow(scratch, std::max(rows * std::size_t(c.vocab_size), t * std::size_t(c.num_experts)));
  return grew;
}

std::int64_t max_logit_rows(int max_tokens, int max_sequences, int logits_per_sequence) {
  const std::int64_t verified = std::int64_t(max_sequences) * std::max(logits_per_sequence, 1);
  return std::max<std::int64_t>(max_sequences, std::min<std::int64_t>(verified, max_tokens));
}

void StepBuffers::reserve(const model::ModelConfig& c, std::int64_t T, std::int64_t R,
                          std::size_t attention_floats) {
  bool grew = act.ensure(c, T, R);
  if (attention_floats > attention_work.size()) {
    attention_work.ensure(attention_floats);
    grew = true;
  }
  if (grew) ++epoch;
}

}  // namespace nibble::backend::cuda
