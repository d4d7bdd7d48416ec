// The shapes the CUDA backend refuses at load, before anything reaches a GPU (host code: runs
// without one): gpt-oss at its public sizes and the tests' small one pass; experts the fused
// kernels cannot take (an intermediate size not a multiple of 16, more than 512 experts, more
// than 16 of them per token), heads the attention kernels cannot take and Gated DeltaNet heads
// the linear-attention kernel cannot take are refused with a message naming what this model has.
#include "engine/backend/cuda/kernel_shapes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/backend/backend.h"
#include "tests/backend/random_model.h"

namespace nibble::backend::cuda {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// gpt-oss-20b's sizes (120b differs in layers and experts: 36, 128).
model::ModelConfig gpt_oss_20b() {
  model::ModelConfig c = testing::gpt_oss_test_config(128);
  c.hidden_size = 2880;
  c.num_heads = 64;
  c.num_kv_heads = 8;
  c.head_dim = 64;
  c.num_experts = 32;
  c.intermediate_size = c.moe_intermediate_size = 2880;
  return c;
}

TEST(CudaKernelShapes, GptOssAtItsSizesRuns) {
  EXPECT_NO_THROW(refuse_shapes_beyond_kernels(testing::gpt_oss_test_config(16)));
  model::ModelConfig c = gpt_oss_20b();
  EXPECT_NO_THROW(refuse_shapes_beyond_kernels(c));
  c.num_experts = 128;  // 120b
  EXPECT_NO_THROW(refuse_shapes_beyond_kernels(c));
  EXPECT_NO_THROW(refuse_shapes_beyond_kernels(testing::qwen3_next_test_config(4, 256, 8)));
}

TEST(CudaKernelShapes, ExpertsTheFusedKernelsCannotTakeAreRefused) {
  model::ModelConfig c = gpt_oss_20b();
  c.intermediate_size = c.moe_intermediate_size = 2888;
  EXPECT_THAT([&] { refuse_shapes_beyond_kernels(c); },
              ThrowsMessage<BackendError>(HasSubstr(
                  "clamped-SwiGLU experts (gpt-oss) of an intermediate_size that is a multiple of "
                  "16, up to 512 experts and top 16; this model has intermediate_size 2888, 32 "
                  "experts, top 4")));
  c = gpt_oss_20b();
  c.num_experts = 640;
  EXPECT_THROW(refuse_shapes_beyond_kernels(c), BackendError);
  c = gpt_oss_20b();
  c.num_experts_per_tok = 17;
  EXPECT_THROW(refuse_shapes_beyond_kernels(c), BackendError);
}

TEST(CudaKernelShapes, HeadsTheKernelsCannotTakeAreRefused) {
  model::ModelConfig c = gpt_oss_20b();
  c.head_dim = 60;
  EXPECT_THAT([&] { refuse_shapes_beyond_kernels(c); },
              ThrowsMessage<BackendError>(HasSubstr("this model has head_dim 60, 64 query and 8 KV "
                                                    "heads")));
  c = gpt_oss_20b();
  c.num_kv_heads = 6;
  EXPECT_THROW(refuse_shapes_beyond_kernels(c), BackendError);
  model::ModelConfig q = testing::qwen3_next_test_config(4, 256, 8);
  q.linear_key_head_dim = 96;
  EXPECT_THAT([&] { refuse_shapes_beyond_kernels(q); },
              ThrowsMessage<BackendError>(HasSubstr("key/value head dims 96/64")));
}

}  // namespace
}  // namespace nibble::backend::cuda
