// nibble-make-model and nibble-quantize end to end: deterministic output, sharding, both NVFP4
// layouts loading to the same weights, and --dequantize reproducing the NVFP4 model exactly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/greedy_decode.h"
#include "engine/model/model_weights.h"
#include "engine/model/quantize_on_load.h"
#include "tests/model/safetensors_fixture.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace nibble {
namespace {

using nibble::testing::run_command;
using ::testing::HasSubstr;

const std::string kMake = NIBBLE_MAKE_MODEL;
const std::string kQuantize = NIBBLE_QUANTIZE;

void make(const std::string& args, const std::filesystem::path& out) {
  auto r = run_command(kMake + " --threads 2 --no-tokenizer " + args + " --output " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

void quantize(const std::string& args, const std::filesystem::path& in,
              const std::filesystem::path& out) {
  auto r = run_command(kQuantize + " --threads 2 " + args + " --input " + in.string() +
                       " --output " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

// The JSON lines `nibble-engine generate` prints on the CPU backend (one per step, then the
// summary), for a greedy run of `prompt_ids` ("1,2,3") with `args` added.
std::vector<nlohmann::json> generate_lines(const std::filesystem::path& model,
                                           const std::string& prompt_ids, const std::string& args) {
  auto r = run_command(std::string(NIBBLE_ENGINE) + " generate --model " + model.string() +
                       " --prompt-ids " + prompt_ids + " --threads 1 " + args + " 2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<nlohmann::json> lines;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("{")) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// generate's tokens (its first `steps` lines) are the library's greedy decode of the prompt.
void expect_library_tokens(const std::filesystem::path& model, const std::vector<int>& prompt,
                           const std::vector<nlohmann::json>& lines, int steps) {
  ASSERT_GE(int(lines.size()), steps);
  auto backend = backend::make_cpu_backend(model::load_model(model), 1);
  auto trace = backend::greedy_decode(*backend, prompt, steps, 1);
  for (int i = 0; i < steps; ++i)
    EXPECT_EQ(lines[std::size_t(i)]["token"], trace.steps[std::size_t(i)].token) << i;
}

std::vector<float> logits_of(const std::filesystem::path& dir) {
  auto backend = backend::make_cpu_backend(model::load_model(dir), 2);
  auto seq = backend->new_sequence(8);
  std::vector<float> logits(std::size_t(backend->config().vocab_size));
  backend->forward(*seq, std::vector<std::int32_t>{7, 1000, 3, 99}, logits);
  return logits;
}

TEST(MakeModel, SameSeedSameBytesOtherSeedOtherBytes) {
  nibble::testing::TempDir dir;
  make("--arch qwen3_moe --preset tiny --seed 3", dir.path() / "a");
  make("--arch qwen3_moe --preset tiny --seed 3", dir.path() / "b");
  make("--arch qwen3_moe --preset tiny --seed 4", dir.path() / "c");
  auto a = model::testing::read_all(dir.path() / "a/model.safetensors");
  EXPECT_EQ(a, model::testing::read_all(dir.path() / "b/model.safetensors"));
  EXPECT_NE(a, model::testing::read_all(dir.path() / "c/model.safetensors"));
  auto cfg = model::load_model_config(dir.path() / "a");
  EXPECT_EQ(cfg.arch, model::Arch::Qwen3Moe);
  EXPECT_EQ(cfg.vocab_size, 151936);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "a/generation_config.json"));
}

TEST(MakeModel, ShardedOutputLoadsLikeOneFile) {
  nibble::testing::TempDir dir;
  make("--arch llama --preset tiny --seed 5", dir.path() / "one");
  make("--arch llama --preset tiny --seed 5 --max-shard-mb 4", dir.path() / "many");
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "one/model.safetensors.index.json"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "many/model.safetensors.index.json"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "many/model-00002-of-00003.safetensors"));
  EXPECT_EQ(logits_of(dir.path() / "one"), logits_of(dir.path() / "many"));
}

TEST(Quantize, BothLayoutsLoadToTheSameWeights) {
  nibble::testing::TempDir dir;
  make("--arch qwen3 --preset tiny --seed 6", dir.path() / "bf16");
  quantize("--format modelopt", dir.path() / "bf16", dir.path() / "mo");
  quantize("--format compressed-tensors", dir.path() / "bf16", dir.path() / "ct");
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "mo/hf_quant_config.json"));
  auto mo = model::load_model(dir.path() / "mo");
  auto ct = model::load_model(dir.path() / "ct");
  EXPECT_EQ(mo.quant.format, model::QuantFormat::ModelOpt);
  EXPECT_EQ(ct.quant.format, model::QuantFormat::CompressedTensors);
  const auto& a = mo.layers[1].down;
  const auto& b = ct.layers[1].down;
  ASSERT_TRUE(a.quantized && b.quantized);
  EXPECT_EQ(a.fp4.packed, b.fp4.packed);
  EXPECT_EQ(a.fp4.scales, b.fp4.scales);
  // compressed-tensors round-trips the factor through its reciprocal: equal to ~1 ulp.
  EXPECT_NEAR(a.fp4.global_factor, b.fp4.global_factor, 1e-6 * a.fp4.global_factor);
  EXPECT_FALSE(mo.lm_head.quantized);  // tied to the BF16 embedding
  const auto la = logits_of(dir.path() / "mo"), lb = logits_of(dir.path() / "ct");
  for (std::size_t i = 0; i < la.size(); i += 997)
    EXPECT_NEAR(la[i], lb[i], 1e-4 * std::abs(la[i]) + 1e-5);
  // Quantizing twice is refused.
  auto r = run_command(kQuantize + " --input " + (dir.path() / "mo").string() + " --output " +
                       (dir.path() / "again").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("already quantized"));
}

TEST(Quantize, QuantizingWhileLoadingMatchesTheQuantizedCheckpoint) {
  nibble::testing::TempDir dir;
  make("--arch qwen3_moe --preset tiny --seed 9", dir.path() / "bf16");
  quantize("--format modelopt", dir.path() / "bf16", dir.path() / "fp4");
  auto on_load = model::load_model(dir.path() / "bf16");
  EXPECT_EQ(model::quantize_weights_nvfp4(on_load),
            8 + 3 + 3 * 8);  // attention, dense MLP, experts
  EXPECT_FALSE(on_load.layers[1].router.quantized);
  auto from_file = model::load_model(dir.path() / "fp4");
  EXPECT_EQ(on_load.layers[1].experts[3].up.fp4.packed,
            from_file.layers[1].experts[3].up.fp4.packed);
  EXPECT_EQ(on_load.layers[0].q.fp4.scales, from_file.layers[0].q.fp4.scales);
  EXPECT_EQ(on_load.layers[0].q.fp4.global_factor, from_file.layers[0].q.fp4.global_factor);
}

// Qwen3-Next: nibble-quantize and quantizing while loading convert the same projections
// (linear attention's and the shared expert's too; the router and shared_expert_gate stay dense)
// to the same bytes, and the NVFP4 model generates through the engine (its own sequence's state
// slot) the tokens of the library path.
TEST(Quantize, Qwen3NextQuantizesTheSameProjectionsOnLoadAndGenerates) {
  nibble::testing::TempDir dir;
  make("--arch qwen3_next --preset tiny --seed 9", dir.path() / "bf16");
  quantize("--format modelopt", dir.path() / "bf16", dir.path() / "fp4");
  auto on_load = model::load_model(dir.path() / "bf16");
  model::quantize_weights_nvfp4(on_load);
  const auto from_file = model::load_model(dir.path() / "fp4");
  int quantized = 0;
  for (std::size_t l = 0; l < on_load.layers.size(); ++l) {
    model::LayerWeights& a = on_load.layers[l];
    const model::LayerWeights& b = from_file.layers[l];
    std::vector<std::pair<const model::Linear*, const model::Linear*>> pairs = {
        {&a.q, &b.q},
        {&a.o, &b.o},
        {&a.linear_attention.in_proj_qkvz, &b.linear_attention.in_proj_qkvz},
        {&a.linear_attention.in_proj_ba, &b.linear_attention.in_proj_ba},
        {&a.linear_attention.out_proj, &b.linear_attention.out_proj},
        {&a.gate, &b.gate},
        {&a.shared_up, &b.shared_up},
        {&a.shared_down, &b.shared_down},
        {&a.shared_expert_gate, &b.shared_expert_gate},
        {&a.router, &b.router}};
    for (std::size_t e = 0; e < a.experts.size(); ++e)
      pairs.push_back({&a.experts[e].down, &b.experts[e].down});
    for (const auto& [x, y] : pairs) {
      SCOPED_TRACE("layer " + std::to_string(l));
      ASSERT_EQ(x->quantized, y->quantized);
      if (!x->quantized) continue;
      ++quantized;
      EXPECT_EQ(x->fp4.packed, y->fp4.packed);
      EXPECT_EQ(x->fp4.scales, y->fp4.scales);
    }
    EXPECT_FALSE(a.router.quantized || a.shared_expert_gate.quantized);
  }
  EXPECT_GT(quantized, 20);
  const auto lines =
      generate_lines(dir.path() / "fp4", "1,2,3,4,5,6,7,8,9,10", "--max-tokens 6 --device cpu");
  ASSERT_EQ(lines.size(), 7u);
  expect_library_tokens(dir.path() / "fp4", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, lines, 6);
}

TEST(Quantize, DequantizeToF32ReproducesTheNvfp4ModelExactly) {
  nibble::testing::TempDir dir;
  make("--arch qwen3_moe --preset tiny --seed 7 --dtype nvfp4 --format compressed-tensors",
       dir.path() / "fp4");
  quantize("--dequantize --dtype f32", dir.path() / "fp4", dir.path() / "dense");
  auto dense = model::load_model(dir.path() / "dense");
  EXPECT_EQ(dense.quant.format, model::QuantFormat::None);
  EXPECT_FALSE(dense.layers[0].q.quantized);
  EXPECT_EQ(logits_of(dir.path() / "fp4"), logits_of(dir.path() / "dense"));
}

TEST(Generate, PrintsOneJsonLinePerStepAndASummary) {
  nibble::testing::TempDir dir;
  make("--arch llama --preset tiny --seed 8", dir.path() / "m");
  const auto lines = generate_lines(dir.path() / "m", "5,6,7", "--max-tokens 4 --top-k 2");
  ASSERT_EQ(lines.size(), 5u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(lines[std::size_t(i)]["step"], i);
    EXPECT_EQ(lines[std::size_t(i)]["top"].size(), 2u);
    EXPECT_EQ(lines[std::size_t(i)]["token"], lines[std::size_t(i)]["top"][0][0]);
    EXPECT_EQ(lines[4]["tokens"][std::size_t(i)], lines[std::size_t(i)]["token"]);
  }
  // The same greedy tokens as the library path.
  expect_library_tokens(dir.path() / "m", {5, 6, 7}, lines, 4);
  auto bad = run_command(std::string(NIBBLE_ENGINE) + " generate --model " +
                         (dir.path() / "m").string() + " --prompt-ids 5,x");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.output, HasSubstr("'x' is not a token id"));
  bad = run_command(std::string(NIBBLE_ENGINE) + " generate --model " + dir.path().string() +
                    " --prompt-ids 5");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.output, HasSubstr("config.json"));
  // Device sampling on the CPU backend: a clear refusal, not a crash.
  bad =
      run_command(std::string(NIBBLE_ENGINE) + " generate --model " + (dir.path() / "m").string() +
                  " --prompt-ids 5 --device cpu --threads 1 --sample-on-device");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.output, HasSubstr("does not sample on the device"));
}

// gpt-oss's tiny preset in the public layout (MXFP4 by default, as shipped) through the engine:
// a prompt of 10 tokens and 12 generated, past the sliding window of 8, the same greedy tokens
// as the library path; nibble-quantize refuses to misread its MXFP4 as NVFP4.
TEST(Generate, GptOssTinyThroughTheEngine) {
  nibble::testing::TempDir dir;
  make("--arch gpt_oss --preset tiny --seed 9", dir.path() / "m");
  const auto config = nlohmann::json::parse(std::ifstream(dir.path() / "m/config.json"));
  EXPECT_EQ(config["quantization_config"]["quant_method"], "mxfp4");
  EXPECT_EQ(config["rope_scaling"]["rope_type"], "yarn");
  EXPECT_EQ(config["layer_types"][0], "sliding_attention");
  const auto lines =
      generate_lines(dir.path() / "m", "1,2,3,4,5,6,7,8,9,10", "--max-tokens 12 --device cpu");
  ASSERT_EQ(lines.size(), 13u);
  expect_library_tokens(dir.path() / "m", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, lines, 12);
  auto bad = run_command(kQuantize + " --threads 1 --dequantize --input " +
                         (dir.path() / "m").string() + " --output " + (dir.path() / "d").string());
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.output, HasSubstr("MXFP4"));
}

TEST(Tools, HelpAndBadArguments) {
  auto help = run_command(kMake + " --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.output, HasSubstr("--preset"));
  help = run_command(kQuantize + " --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.output, HasSubstr("--dequantize"));
  EXPECT_EQ(
      run_command(kMake + " --arch gpt2 --preset tiny --no-tokenizer --output /tmp/x").exit_code,
      1);
  EXPECT_EQ(run_command(kMake + " --arch llama").exit_code, 2);
  EXPECT_EQ(run_command(kQuantize + " --input /nonexistent --output /tmp/y").exit_code, 1);
}

}  // namespace
}  // namespace nibble

namespace nibble {
namespace {

// --shared-global-scales: the projections an engine fuses get one NVFP4 global factor (as
// ModelOpt exports them); by default each tensor has its own.
TEST(MakeModel, SharedGlobalScalesGiveFusedGroupsOneFactor) {
  nibble::testing::TempDir dir;
  make("--arch llama --preset tiny --seed 3 --dtype nvfp4 --shared-global-scales",
       dir.path() / "shared");
  make("--arch llama --preset tiny --seed 3 --dtype nvfp4", dir.path() / "own");
  const auto shared = model::load_model(dir.path() / "shared");
  const auto own = model::load_model(dir.path() / "own");
  const auto& s = shared.layers[0];
  EXPECT_EQ(s.q.fp4.global_factor, s.k.fp4.global_factor);
  EXPECT_EQ(s.q.fp4.global_factor, s.v.fp4.global_factor);
  EXPECT_EQ(s.gate.fp4.global_factor, s.up.fp4.global_factor);
  const auto& o = own.layers[0];
  EXPECT_NE(o.q.fp4.global_factor, o.k.fp4.global_factor);
  // Both quantize the same values: they dequantize to nearly the same matrix.
  const auto a = nvfp4::dequantize_matrix(s.q.fp4), b = nvfp4::dequantize_matrix(o.q.fp4);
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    ref += b[i] * b[i];
  }
  EXPECT_LT(std::sqrt(diff / ref), 0.1);
}

}  // namespace
}  // namespace nibble
