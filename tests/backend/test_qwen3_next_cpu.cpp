// Qwen3-Next on the CPU backend, on nibble-make-model's tiny qwen3_next (4 layers: Gated
// DeltaNet at 0-2, gated full attention at 3, layer 1 dense, the rest MoE with a shared expert):
// the checkpoint's tensors load into the description's layout, a prompt gives the same logits
// in one chunk, in chunks at any boundary (across the delta rule's 64-token chunks) or token by
// token; a batch of sequences in one step equals each alone; a state slot reused from position 0
// (a preempted sequence recomputed) starts fresh; the state slots are checked; a verify step's
// rejected drafts leave no trace (the state rolls back to the accepted length, and a start the
// slot did not keep is refused); the CUDA backend refuses none of its features, and the
// zero-centred norms it folds at load compute the originals; and the engine loop serves several
// requests through a small cache (chunked prefills, preemptions) with each one's tokens as when
// it runs alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "engine/backend/backend.h"
#include "engine/backend/backend_model_runner.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/cpu_kv_cache.h"
#include "engine/backend/cpu/cpu_ops.h"
#include "engine/backend/greedy_decode.h"
#include "engine/backend/zero_centred_norms.h"
#include "engine/model/model_description.h"
#include "engine/model/model_weights.h"
#include "engine/model/quantize_on_load.h"
#include "engine/runtime/engine_loop.h"
#include "tests/backend/chunk_logits.h"
#include "tests/backend/tiny_models.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace nibble::backend {
namespace {

using nibble::testing::max_relative_difference;
using ::testing::HasSubstr;

class Qwen3NextCpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new nibble::testing::TempDir();
    nibble::testing::make_tiny_models(dir_->path(), "qwen3_next", 41, {"bf16", "nvfp4"});
  }
  static void TearDownTestSuite() { delete dir_; }
  static model::ModelWeights load(const char* dtype) {
    return model::load_model(dir_->path() / dtype);
  }
  static nibble::testing::TempDir* dir_;
};
nibble::testing::TempDir* Qwen3NextCpu::dir_ = nullptr;

// 70 tokens: longer than one 64-token chunk of the chunked delta rule.
std::vector<std::int32_t> prompt(int n = 70) {
  std::vector<std::int32_t> p(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) p[std::size_t(i)] = (7919 * i + 17) % 151936;
  return p;
}

using nibble::testing::split;

std::vector<float> run(Backend& b, const std::vector<std::vector<std::int32_t>>& chunks) {
  return nibble::testing::logits_after_chunks(b, chunks, 128);
}

TEST_F(Qwen3NextCpu, LoadsTheCheckpointLayout) {
  const model::ModelWeights w = load("bf16");
  const model::ModelDescription d = model::describe_model(w.config);
  ASSERT_EQ(w.layers.size(), 4u);
  EXPECT_EQ(w.config.rotary_dim, 4);  // head_dim 16 x 0.25
  for (int l = 0; l < 3; ++l) {
    ASSERT_EQ(d.layers[std::size_t(l)].mixer, model::MixerKind::kGatedDeltaNet);
    const model::LinearAttentionWeights& la = w.layers[std::size_t(l)].linear_attention;
    EXPECT_EQ(la.in_proj_qkvz.out_features, 2 * (2 * 8 + 2 * 2 * 8));  // 2 key heads, group 2
    EXPECT_EQ(la.in_proj_ba.out_features, 8);
    EXPECT_EQ(la.conv_weight.size(), std::size_t(2 * 2 * 8 + 4 * 8) * 4);
    EXPECT_EQ(la.A_log.size(), 4u);
    EXPECT_EQ(la.norm.size(), 8u);
    EXPECT_EQ(la.out_proj.in_features, 32);
    EXPECT_TRUE(w.layers[std::size_t(l)].q.dense.empty());  // no attention weights
  }
  EXPECT_EQ(d.layers[3].mixer, model::MixerKind::kAttention);
  EXPECT_EQ(w.layers[3].q.out_features, 2 * 4 * 16);  // query and gate per head
  EXPECT_EQ(w.layers[3].q_norm.size(), 16u);
  EXPECT_FALSE(w.layers[1].moe);  // mlp_only_layers [1]
  for (int l : {0, 2, 3}) {
    const model::LayerWeights& lw = w.layers[std::size_t(l)];
    ASSERT_TRUE(lw.moe);
    EXPECT_EQ(lw.experts.size(), 8u);
    EXPECT_EQ(lw.shared_gate.out_features, 32);
    EXPECT_EQ(lw.shared_expert_gate.out_features, 1);
  }
  // NVFP4: the projections quantized (linear attention's too), the gates and conv kept.
  const model::ModelWeights q = load("nvfp4");
  EXPECT_TRUE(q.layers[0].linear_attention.in_proj_qkvz.quantized);
  EXPECT_TRUE(q.layers[0].linear_attention.out_proj.quantized);
  EXPECT_TRUE(q.layers[0].shared_up.quantized);
  EXPECT_FALSE(q.layers[0].shared_expert_gate.quantized);
  EXPECT_FALSE(q.layers[0].router.quantized);
  // Quantize-on-load converts the same projections of the BF16 model.
  model::ModelWeights on_load = load("bf16");
  EXPECT_GT(model::quantize_weights_nvfp4(on_load), 0);
  EXPECT_TRUE(on_load.layers[2].linear_attention.in_proj_ba.quantized);
  EXPECT_TRUE(on_load.layers[3].shared_down.quantized);
  EXPECT_FALSE(on_load.layers[3].shared_expert_gate.quantized);
}

// The chunked delta rule (prefill) and the recurrent one (decode) agree to rounding, and the
// conv window and state carry across chunk boundaries: float32 activations, so well under 1e-4.
TEST_F(Qwen3NextCpu, ChunksAtAnyBoundaryAndTokenByTokenAgree) {
  for (const char* dtype : {"bf16", "nvfp4"}) {
    SCOPED_TRACE(dtype);
    auto backend = make_cpu_backend(load(dtype), 2);
    const auto p = prompt();
    const auto whole = run(*backend, {p});
    for (const auto& sizes : std::vector<std::vector<int>>{
             {23, 47}, {1, 69}, {64, 6}, {65, 5}, {3, 2, 60, 5}, {69, 1}}) {
      SCOPED_TRACE(::testing::PrintToString(sizes));
      EXPECT_LT(max_relative_difference(run(*backend, split(p, sizes)), whole), 1e-5);
    }
    std::vector<std::vector<std::int32_t>> singles;
    for (auto t : p) singles.push_back({t});
    EXPECT_LT(max_relative_difference(run(*backend, singles), whole), 1e-5);
  }
}

// Three sequences in one step of a shared cache: a first chunk, a later chunk and a decode
// token, each in its own state slot, give each sequence's logits alone.
TEST_F(Qwen3NextCpu, ABatchOfSequencesEqualsEachAlone) {
  auto backend = make_cpu_backend(load("bf16"), 2);
  const int V = backend->config().vocab_size;
  const auto a = prompt(40), b = prompt(70), c = prompt(9);
  auto cache = backend->new_kv_cache_with_state(3 * 8, 16, 3);
  std::vector<int> ta(8), tb(8), tc(8);
  std::iota(ta.begin(), ta.end(), 0);
  std::iota(tb.begin(), tb.end(), 8);
  std::iota(tc.begin(), tc.end(), 16);
  std::vector<float> la(static_cast<std::size_t>(V)), lb(la.size()), lc(la.size());
  // Step 1: b's first 50 tokens, c's first 8 (slot 2), a not yet.
  BatchItem b1{std::span(b).first(50), 0, tb, {}};
  b1.state_slot = 0;
  BatchItem c1{std::span(c).first(8), 0, tc, {}};
  c1.state_slot = 2;
  const BatchItem step1[] = {b1, c1};
  backend->forward_batch(*cache, step1);
  // Step 2: a whole (slot 1), b's last 20, c's last token (a decode).
  BatchItem a2{a, 0, ta, la};
  a2.state_slot = 1;
  BatchItem b2{std::span(b).subspan(50), 50, tb, lb};
  b2.state_slot = 0;
  BatchItem c2{std::span(c).subspan(8), 8, tc, lc};
  c2.state_slot = 2;
  const BatchItem step2[] = {c2, a2, b2};
  backend->forward_batch(*cache, step2);
  EXPECT_LT(max_relative_difference(la, run(*backend, {a})), 1e-5);
  EXPECT_LT(max_relative_difference(lb, run(*backend, {b})), 1e-5);
  EXPECT_LT(max_relative_difference(lc, run(*backend, {c})), 1e-5);
}

// A slot that held another sequence starts from zeros at position 0: what a preempted sequence
// recomputed from its prompt, or a new sequence in a freed slot, needs.
TEST_F(Qwen3NextCpu, ASlotReusedFromPositionZeroStartsFresh) {
  auto backend = make_cpu_backend(load("bf16"), 2);
  const int V = backend->config().vocab_size;
  const auto first = prompt(30), second = prompt(12);
  auto cache = backend->new_kv_cache_with_state(8, 16, 1);
  std::vector<int> table(8);
  std::iota(table.begin(), table.end(), 0);
  std::vector<float> logits(static_cast<std::size_t>(V));
  BatchItem item{first, 0, table, {}};
  item.state_slot = 0;
  backend->forward_batch(*cache, std::span(&item, 1));
  item = {second, 0, table, logits};
  item.state_slot = 0;
  backend->forward_batch(*cache, std::span(&item, 1));
  EXPECT_EQ(logits, run(*backend, {second}));
}

TEST_F(Qwen3NextCpu, StateSlotsAreChecked) {
  auto backend = make_cpu_backend(load("bf16"), 1);
  EXPECT_GT(backend->state_slot_bytes(), 0u);
  // 3 layers x ((4 - 1) x 64 conv channels + 4 heads x 8 x 8) floats.
  EXPECT_EQ(backend->state_slot_bytes(), 3u * (3 * 64 + 4 * 8 * 8) * sizeof(float));
  auto cache = backend->new_kv_cache_with_state(4, 16, 2);
  EXPECT_EQ(cache->num_state_slots(), 2);
  const auto p = prompt(5);
  std::vector<int> t0 = {0}, t1 = {1};
  BatchItem none{p, 0, t0, {}};  // no slot
  EXPECT_THAT([&] { backend->forward_batch(*cache, std::span(&none, 1)); },
              ::testing::ThrowsMessage<BackendError>(HasSubstr("state slot -1")));
  BatchItem x{p, 0, t0, {}}, y{p, 0, t1, {}};
  x.state_slot = y.state_slot = 1;
  const BatchItem both[] = {x, y};
  EXPECT_THAT([&] { backend->forward_batch(*cache, both); },
              ::testing::ThrowsMessage<BackendError>(HasSubstr("share a state slot")));
  x.state_slot = 2;
  EXPECT_THROW(backend->forward_batch(*cache, std::span(&x, 1)), BackendError);
}

// Speculative decoding's rollback (cpu_kv_cache.h): a verify step of a decode token and three
// drafts, of which the engine accepts `accepted`; the next step starts at the accepted length
// and its logits equal, bitwise, those of a sequence that never saw the rejected drafts (fed
// one token at a time, as decoding without drafts does). The verify step's own logits rows
// equal those of token-by-token decoding too. A second verify step from the restored state
// rolls back as well.
TEST_F(Qwen3NextCpu, ARejectedDraftLeavesNoTraceInTheState) {
  auto backend = make_cpu_backend(load("bf16"), 2);
  const std::size_t V = std::size_t(backend->config().vocab_size);
  const auto p = prompt(20);
  // The decode token, then three drafts; the rollback does not care whether they are right.
  const std::vector<std::int32_t> verify = {11, 500, 1234, 77}, verify2 = {9, 4242, 31};
  for (int accepted : {0, 1, 2, 3}) {
    SCOPED_TRACE("accepted " + std::to_string(accepted));
    auto cache = backend->new_kv_cache_with_state(8, 16, 2);
    std::vector<int> table(8);
    std::iota(table.begin(), table.end(), 0);
    std::vector<float> rows(4 * V), next(V), rows2(3 * V), after(V);
    BatchItem step{p, 0, table, {}};
    step.state_slot = 1;
    backend->forward_batch(*cache, std::span(&step, 1));
    step = {verify, int(p.size()), table, rows};
    step.state_slot = 1;
    step.num_logits = 4;
    backend->forward_batch(*cache, std::span(&step, 1));
    // The target's token after the accepted drafts (any token: the test checks the state).
    const std::int32_t target = 4000 + accepted;
    const int resume = int(p.size()) + accepted + 1;
    step = {std::span(&target, 1), resume, table, next};
    step.state_slot = 1;
    backend->forward_batch(*cache, std::span(&step, 1));

    // The sequence that never saw the rejected drafts, token by token after its prompt.
    std::vector<std::vector<std::int32_t>> seen = {p};
    for (int j = 0; j <= accepted; ++j) {
      seen.push_back({verify[std::size_t(j)]});
      EXPECT_EQ(std::vector<float>(rows.begin() + std::ptrdiff_t(std::size_t(j) * V),
                                   rows.begin() + std::ptrdiff_t(std::size_t(j + 1) * V)),
                run(*backend, seen))
          << "verify row " << j;
    }
    seen.push_back({target});
    EXPECT_EQ(next, run(*backend, seen));

    // A second verify step from there, its first draft rejected.
    step = {verify2, resume + 1, table, rows2};
    step.state_slot = 1;
    step.num_logits = 3;
    backend->forward_batch(*cache, std::span(&step, 1));
    const std::int32_t target2 = 6000;
    step = {std::span(&target2, 1), resume + 2, table, after};
    step.state_slot = 1;
    backend->forward_batch(*cache, std::span(&step, 1));
    seen.push_back({verify2[0]});
    seen.push_back({target2});
    EXPECT_EQ(after, run(*backend, seen));
  }
}

// A step may start a slot only at 0, at its live position, or at a position its last (verify)
// step kept: anything else is the engine's logic error, named with the slot and positions, and
// leaves the slot as it was.
TEST_F(Qwen3NextCpu, AStartTheSlotDidNotKeepIsALogicError) {
  auto backend = make_cpu_backend(load("bf16"), 1);
  const std::size_t V = std::size_t(backend->config().vocab_size);
  auto cache = backend->new_kv_cache_with_state(4, 16, 2);
  std::vector<int> table = {0, 1, 2, 3};
  const auto p = prompt(10);
  const std::vector<std::int32_t> verify = {3, 5, 8};
  std::vector<float> rows(3 * V), logits(V);
  BatchItem step{p, 0, table, {}};
  step.state_slot = 0;
  backend->forward_batch(*cache, std::span(&step, 1));
  step = {verify, 10, table, rows};
  step.state_slot = 0;
  step.num_logits = 3;
  backend->forward_batch(*cache, std::span(&step, 1));  // keeps positions 11..13, live at 13
  const std::int32_t token = 21;
  for (int start : {10, 14, 5}) {
    step = {std::span(&token, 1), start, table, logits};
    step.state_slot = 0;
    EXPECT_THAT([&] { backend->forward_batch(*cache, std::span(&step, 1)); },
                ::testing::ThrowsMessage<std::logic_error>(
                    HasSubstr("state slot 0 is at position 13 with states kept at positions "
                              "11..13; a step cannot start it at position " +
                              std::to_string(start))));
  }
  // A slot never run has no position to continue from.
  step = {std::span(&token, 1), 4, table, logits};
  step.state_slot = 1;
  EXPECT_THAT([&] { backend->forward_batch(*cache, std::span(&step, 1)); },
              ::testing::ThrowsMessage<std::logic_error>(
                  HasSubstr("state slot 1 is at position -1 with states kept at positions none")));
  // The refused steps changed nothing: slot 0 rolls back to 12 as if they never came.
  step = {std::span(&token, 1), 12, table, logits};
  step.state_slot = 0;
  backend->forward_batch(*cache, std::span(&step, 1));
  EXPECT_EQ(logits, run(*backend, {p, {3}, {5}, {token}}));
  // A decode step keeps nothing: the slot cannot go back to 11 after it.
  step = {std::span(&token, 1), 11, table, logits};
  step.state_slot = 0;
  EXPECT_THROW(backend->forward_batch(*cache, std::span(&step, 1)), std::logic_error);
  // Kept states are allocated only by verify steps: slot 0's three, none for slot 1.
  EXPECT_EQ(dynamic_cast<const cpu::CpuKvCache&>(*cache).kept_state_bytes(),
            3 * backend->state_slot_bytes());
}

// The serving path (engine loop, scheduler, state slots, BackendModelRunner) with chunked
// prefill under a 16-token budget and a KV cache of 14 four-token blocks that cannot hold the
// six requests at once, so sequences are preempted and recomputed from their prompts: every
// request's greedy tokens equal its greedy decode alone.
TEST_F(Qwen3NextCpu, TheEngineServesABatchWithPreemptionsAsEachAlone) {
  auto backend = make_cpu_backend(load("bf16"), 2);
  constexpr int kMaxSeqs = 6, kNewTokens = 8;
  BackendModelRunner runner(*backend, 14, 4, kMaxSeqs);
  ASSERT_EQ(runner.num_state_slots(), kMaxSeqs);
  metrics::Registry registry;
  runtime::EngineConfig config;
  config.model_name = "tiny-next";
  config.max_model_len = 56;
  config.scheduler = {.max_num_seqs = kMaxSeqs, .max_num_batched_tokens = 16};
  runtime::EngineLoop engine(config, runner, registry);
  engine.start();
  std::vector<std::vector<std::int32_t>> prompts;
  std::vector<std::shared_ptr<runtime::OutputChannel>> channels;
  for (int n : {10, 31, 5, 22, 17, 40}) {
    prompts.push_back(prompt(n));
    runtime::GenerationRequest r;
    r.id = "r" + std::to_string(n);
    r.prompt.assign(prompts.back().begin(), prompts.back().end());
    r.params.max_tokens = kNewTokens;
    r.params.temperature = 0;
    r.params.ignore_eos = true;
    r.channel = std::make_shared<runtime::OutputChannel>();
    channels.push_back(r.channel);
    ASSERT_EQ(engine.submit(std::move(r)).status, runtime::SubmitStatus::kAccepted);
  }
  std::vector<std::vector<int>> got(prompts.size());
  std::size_t finished = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (finished < prompts.size() && std::chrono::steady_clock::now() < deadline)
    for (std::size_t i = 0; i < channels.size(); ++i)
      for (const runtime::TokenEvent& e : channels[i]->pop(std::chrono::milliseconds(1))) {
        if (e.token >= 0) got[i].push_back(e.token);
        finished += e.finish != runtime::FinishReason::kNone;
      }
  engine.drain_and_stop(std::chrono::seconds(5));
  ASSERT_EQ(finished, prompts.size());
  EXPECT_NE(registry.render().find("nibble_preemptions_total{model_name=\"tiny-next\"} "),
            std::string::npos);
  EXPECT_EQ(registry.render().find("nibble_preemptions_total{model_name=\"tiny-next\"} 0\n"),
            std::string::npos)
      << "the cache was meant to force preemptions";
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const GreedyTrace alone = greedy_decode(*backend, prompts[i], kNewTokens, 1);
    std::vector<int> want;
    for (const auto& s : alone.steps) want.push_back(s.token);
    EXPECT_EQ(got[i], want) << "prompt of " << prompts[i].size() << " tokens";
  }
}

// Zero-centred norms folded for a plain RMSNorm (the CUDA backend's device copy): the layers'
// input, post-attention and q/k norms and the final norm gain 1, the linear-attention layers'
// gated norm does not, and the description then says kRms everywhere; a row normed with the
// folded weight as a plain norm equals the zero-centred norm of the original.
TEST_F(Qwen3NextCpu, ZeroCentredNormsFoldIntoPlainOnes) {
  const model::ModelWeights original = load("bf16");
  model::ModelWeights folded = original;
  const model::ModelDescription d =
      fold_zero_centred_norms(folded, model::describe_model(original.config));
  for (const model::LayerSpec& l : d.layers) EXPECT_EQ(l.norm, model::NormKind::kRms);
  EXPECT_EQ(d.final_norm, model::NormKind::kRms);
  const auto plus_one = [](const std::vector<float>& w) {
    std::vector<float> v = w;
    for (float& x : v) x += 1.0f;
    return v;
  };
  for (std::size_t l = 0; l < original.layers.size(); ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    const model::LayerWeights &o = original.layers[l], &f = folded.layers[l];
    EXPECT_EQ(f.input_norm, plus_one(o.input_norm));
    EXPECT_EQ(f.post_attention_norm, plus_one(o.post_attention_norm));
    EXPECT_EQ(f.q_norm, plus_one(o.q_norm));
    EXPECT_EQ(f.k_norm, plus_one(o.k_norm));
    EXPECT_EQ(f.linear_attention.norm, o.linear_attention.norm);
  }
  EXPECT_FALSE(folded.layers[3].q_norm.empty());
  EXPECT_EQ(folded.final_norm, plus_one(original.final_norm));
  // A model without zero-centred norms is left as it is.
  model::ModelWeights plain = original;
  model::ModelDescription rms = model::describe_model(original.config);
  for (model::LayerSpec& l : rms.layers) l.norm = model::NormKind::kRms;
  rms.final_norm = model::NormKind::kRms;
  (void)fold_zero_centred_norms(plain, rms);
  EXPECT_EQ(plain.layers[0].input_norm, original.layers[0].input_norm);
  EXPECT_EQ(plain.final_norm, original.final_norm);
  // x / rms(x) * (w + 1) is x / rms(x) * w + x / rms(x): a row normed both ways agrees to
  // rounding.
  std::vector<float> a = {0.5f, -1.25f, 2.0f, 0.75f}, b = a;
  const std::vector<float> w = {0.1f, -0.2f, 0.3f, 0.05f};
  cpu::rms_norm(a, 4, w, 1e-6f, 1.0f);
  cpu::rms_norm(b, 4, plus_one(w), 1e-6f);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_FLOAT_EQ(a[i], b[i]);
}

// An MTP module (take_mtp_module) on the CUDA backend: nothing refused, and its input's two
// norms, which are of the final norm's kind (decoder_forward.h), fold with it; a target that
// still carries its module (input kEmbedding) leaves the module's norms alone.
TEST_F(Qwen3NextCpu, AnMtpModulesInputNormsFoldWithItsFinalNorm) {
  model::ModelWeights target = load("bf16");
  ASSERT_TRUE(target.mtp.has_value());
  model::ModelWeights carrying = target;
  (void)fold_zero_centred_norms(carrying, model::describe_model(target.config));
  EXPECT_EQ(carrying.mtp->embedding_norm, target.mtp->embedding_norm);
  EXPECT_EQ(carrying.mtp->hidden_norm, target.mtp->hidden_norm);
  const model::ModelWeights original = model::take_mtp_module(target);
  model::ModelWeights folded = original;
  const model::ModelDescription d =
      fold_zero_centred_norms(folded, model::describe_model(original.config));
  EXPECT_EQ(d.input, model::ModelInput::kEmbeddingAndHidden);
  EXPECT_EQ(d.final_norm, model::NormKind::kRms);
  const auto plus_one = [](const std::vector<float>& w) {
    std::vector<float> v = w;
    for (float& x : v) x += 1.0f;
    return v;
  };
  EXPECT_EQ(folded.final_norm, plus_one(original.final_norm));
  EXPECT_EQ(folded.mtp->embedding_norm, plus_one(original.mtp->embedding_norm));
  EXPECT_EQ(folded.mtp->hidden_norm, plus_one(original.mtp->hidden_norm));
  EXPECT_EQ(folded.mtp->fc.dense, original.mtp->fc.dense);
}

}  // namespace
}  // namespace nibble::backend
