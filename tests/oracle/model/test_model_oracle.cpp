// The CPU backend against Hugging Face transformers: golden/*.json were written by
// make_goldens.py (float64 transformers) from models built by make_models.py. Here each model of
// recipes.json is rebuilt from its recipe with nibble-make-model (deterministic for a seed), run
// by our CPU backend (NVFP4 and MXFP4 models straight from their quantized checkpoints), and
// compared step by step: identical greedy tokens, and top-k logits within 1e-3 relative error.
// A recipe whose golden file is not there yet is skipped with the command that makes it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/greedy_decode.h"
#include "engine/model/model_weights.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace nibble {
namespace {

// A function, not a global: the test list is built during static initialization.
std::filesystem::path golden_dir() {
  return NIBBLE_MODEL_GOLDEN_DIR;  // set by CMake
}

std::vector<std::string> recipe_names() {
  std::ifstream in(golden_dir().parent_path() / "recipes.json");
  const auto recipes = nlohmann::json::parse(in);
  std::vector<std::string> names;
  for (const auto& m : recipes["models"]) names.push_back(m["name"]);
  return names;
}

class ModelOracle : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelOracle, CpuBackendMatchesTransformers) {
  const auto golden_file = golden_dir() / (GetParam() + ".json");
  if (!std::filesystem::exists(golden_file))
    GTEST_SKIP() << "no golden for " << GetParam() << " (" << golden_file.string()
                 << "); make it on a machine with torch and transformers: "
                    "tests/oracle/model/make_models.py BUILD MODELS && "
                    "tests/oracle/model/make_goldens.py MODELS tests/oracle/model/golden "
                 << GetParam();
  std::ifstream in(golden_file);
  const auto golden = nlohmann::json::parse(in);
  const auto& recipe = golden["model"];
  nibble::testing::TempDir dir;
  const auto model_dir = dir.path() / "model";
  std::string cmd =
      std::string(NIBBLE_MAKE_MODEL) + " --arch " + recipe["arch"].get<std::string>() +
      " --preset " + recipe.value("preset", std::string("tiny")) + " --seed " +
      std::to_string(recipe["seed"].get<int>()) + " --dtype " + recipe["dtype"].get<std::string>() +
      " --threads 1 --no-tokenizer --output " + model_dir.string();
  if (recipe.contains("format")) cmd += " --format " + recipe["format"].get<std::string>();
  auto made = nibble::testing::run_command(cmd);
  ASSERT_EQ(made.exit_code, 0) << cmd << "\n" << made.output;

  auto backend = backend::make_cpu_backend(model::load_model(model_dir), 0);
  const int steps = golden["decode_steps"].get<int>() + 1;
  double worst = 0;
  for (const auto& p : golden["prompts"]) {
    const auto prompt = p["prompt"].get<std::vector<std::int32_t>>();
    const auto& expected = p["steps"];
    ASSERT_EQ(int(expected.size()), steps);
    backend::greedy_decode(
        *backend, prompt, steps, 1,
        [&](int step, const backend::StepLogits& s, const std::vector<float>& logits) {
          const auto& want = expected[std::size_t(step)];
          ASSERT_EQ(s.token, want["token"].get<int>())
              << "prompt of " << prompt.size() << " tokens, step " << step;
          double max_ref = 0, max_diff = 0;
          for (const auto& entry : want["top"]) {
            const auto id = entry[0].get<std::size_t>();
            const double ref = entry[1].get<double>();
            max_ref = std::max(max_ref, std::abs(ref));
            max_diff = std::max(max_diff, std::abs(double(logits[id]) - ref));
          }
          const double rel = max_diff / std::max(max_ref, 1e-30);
          worst = std::max(worst, rel);
          EXPECT_LE(rel, 1e-3) << "prompt of " << prompt.size() << " tokens, step " << step;
        });
  }
  RecordProperty("worst_relative_error", std::to_string(worst));
  std::printf("%s: worst relative error of top-k logits %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Goldens, ModelOracle, ::testing::ValuesIn(recipe_names()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (auto& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

}  // namespace
}  // namespace nibble
