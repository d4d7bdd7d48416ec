// `nibble import`: spark-vllm-docker recipes to ModelRecipes, flags mapped or listed as dropped.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "controller/recipe/recipe_parse.h"
#include "controller/recipe/recipe_yaml.h"
#include "controller/recipe/spark_vllm_import.h"
#include "engine/cli/serve_options.h"

namespace nibble::recipe {
namespace {

std::string read(const std::string& relative) {
  std::ifstream in(std::string(NIBBLE_SOURCE_DIR) + "/" + relative);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool dropped(const ImportResult& r, const std::string& flag) {
  for (const auto& d : r.dropped) {
    if (d.flag == flag) return true;
  }
  return false;
}

TEST(SparkVllmImport, ExampleRecipeMapsFlagsAndListsTheRest) {
  ImportResult r =
      import_spark_vllm_recipe(read("examples/recipes/spark-vllm/qwen3-30b-a3b-nvfp4.yaml"));
  ASSERT_TRUE(r.ok()) << r.errors.at(0);
  EXPECT_EQ(r.recipe.name, "qwen3-30b-a3b-nvfp4");
  EXPECT_EQ(r.recipe.source.repo, "nvidia/Qwen3-30B-A3B-NVFP4");
  EXPECT_EQ(r.recipe.served_name, "qwen3-30b");
  EXPECT_EQ(*r.recipe.engine.max_model_len, 32768);  // from {max_model_len} in defaults
  EXPECT_EQ(r.recipe.engine.max_num_seqs, 64);
  EXPECT_EQ(r.recipe.engine.kv_cache_dtype, "fp8");
  EXPECT_DOUBLE_EQ(r.recipe.engine.gpu_memory_utilization, 0.8);
  EXPECT_TRUE(r.recipe.placement.solo_only);
  EXPECT_TRUE(dropped(r, "--port 8000"));
  EXPECT_TRUE(dropped(r, "--trust-remote-code"));
  EXPECT_FALSE(dropped(r, "-tp 1"));  // one GPU: nothing lost
  EXPECT_TRUE(dropped(r, "--load-format fastsafetensors"));
  EXPECT_EQ(r.dropped.size(), 4u);
}

// docs/recipes.md shows `nibble import` on the example (pasted from a run; the CLI prints each
// dropped flag as "nibble import: dropped FLAG (REASON)"): the sample must be what import does.
TEST(SparkVllmImport, TheSampleInRecipesMdIsWhatImportDrops) {
  const ImportResult r =
      import_spark_vllm_recipe(read("examples/recipes/spark-vllm/qwen3-30b-a3b-nvfp4.yaml"));
  std::string expected;
  for (const DroppedFlag& d : r.dropped)
    expected += "nibble import: dropped " + d.flag + " (" + d.reason + ")\n";
  std::istringstream doc(read("docs/recipes.md"));
  std::string line, documented;
  while (std::getline(doc, line))
    if (line.rfind("nibble import: ", 0) == 0) documented += line + "\n";
  EXPECT_FALSE(documented.empty()) << "docs/recipes.md shows no `nibble import` output";
  EXPECT_EQ(documented, expected);
}

// Issue 45 item 4: the flags nibble-engine serve shares with vLLM reach the engine through
// extraArgs, so an imported Qwen3 recipe serves tool_choice "auto" and returns reasoning.
TEST(SparkVllmImport, EngineFlagsGoToExtraArgs) {
  ImportResult r =
      import_spark_vllm_recipe(read("examples/recipes/spark-vllm/qwen3-30b-a3b-nvfp4.yaml"));
  ASSERT_TRUE(r.ok()) << r.errors.at(0);
  EXPECT_FALSE(dropped(r, "--reasoning-parser qwen3"));
  EXPECT_FALSE(dropped(r, "--enable-auto-tool-choice"));
  EXPECT_FALSE(dropped(r, "--tool-call-parser hermes"));
  EXPECT_EQ(r.recipe.engine.extra_args,
            (std::vector<std::string>{"--enable-auto-tool-choice", "--tool-call-parser", "hermes",
                                      "--reasoning-parser", "qwen3"}));
  // What the engine makes of them: the options that decide the 400 for tools.
  std::vector<std::string> command = {"serve", "--model", "/m"};
  command.insert(command.end(), r.recipe.engine.extra_args.begin(),
                 r.recipe.engine.extra_args.end());
  engine::cli::ServeOptions options;
  engine::cli::parse_serve_options(command, options);
  EXPECT_TRUE(options.enable_auto_tool_choice);
  EXPECT_EQ(options.tool_call_parser, "hermes");
  EXPECT_EQ(options.reasoning_parser, "qwen3");

  // A switch followed by another flag, and a value the engine does not take.
  ImportResult other = import_spark_vllm_recipe(
      "name: x\ncommand: vllm serve a/b --enable-auto-tool-choice --tool-call-parser pythonic "
      "--enforce-eager --max-num-seqs 8");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other.recipe.engine.extra_args,
            (std::vector<std::string>{"--enable-auto-tool-choice", "--enforce-eager"}));
  EXPECT_EQ(other.recipe.engine.max_num_seqs, 8);
  ASSERT_EQ(other.dropped.size(), 1u);
  EXPECT_EQ(other.dropped[0].flag, "--tool-call-parser pythonic");
  EXPECT_NE(other.dropped[0].reason.find("hermes"), std::string::npos) << other.dropped[0].reason;
}

TEST(SparkVllmImport, OutputIsAValidRecipeThatRoundTrips) {
  ImportResult r =
      import_spark_vllm_recipe(read("examples/recipes/spark-vllm/qwen3-30b-a3b-nvfp4.yaml"));
  ASSERT_TRUE(r.ok());
  ParseResult parsed = parse_model_recipe(to_yaml(r.recipe));
  ASSERT_TRUE(parsed.ok()) << parsed.error_text();
  EXPECT_EQ(to_yaml(parsed.recipe), to_yaml(r.recipe));
  // The committed imported example is what `nibble import` prints today, byte for byte (run
  // from the source directory).
  const std::string committed = read("examples/recipes/qwen3-30b-a3b-imported.yaml");
  EXPECT_EQ(imported_recipe_text("examples/recipes/spark-vllm/qwen3-30b-a3b-nvfp4.yaml", r),
            committed)
      << "regenerate it: nibble import examples/recipes/spark-vllm/qwen3-30b-a3b-nvfp4.yaml > "
         "examples/recipes/qwen3-30b-a3b-imported.yaml";
  ParseResult parsed_committed = parse_model_recipe(committed);
  ASSERT_TRUE(parsed_committed.ok()) << parsed_committed.error_text();
}

TEST(SparkVllmImport, Refusals) {
  EXPECT_FALSE(import_spark_vllm_recipe("name: x\ncommand: sglang serve y").ok());
  EXPECT_FALSE(import_spark_vllm_recipe("command: vllm serve a/b").ok());  // no name
  EXPECT_FALSE(
      import_spark_vllm_recipe("name: x\ncluster_only: true\ncommand: vllm serve a/b").ok());
  EXPECT_FALSE(import_spark_vllm_recipe("name: x\ncommand: vllm serve a/b --port {port}")
                   .ok());  // no default
  EXPECT_FALSE(
      import_spark_vllm_recipe("name: x\ncommand: \"vllm serve 'a/b\"").ok());  // unclosed quote
  EXPECT_FALSE(import_spark_vllm_recipe("[not, a, map]").ok());
  ImportResult tp = import_spark_vllm_recipe(
      "name: Big One\ncommand: vllm serve org/big -tp 2 --kv-cache-dtype int4");
  ASSERT_TRUE(tp.ok());
  EXPECT_EQ(tp.recipe.name, "big-one");
  EXPECT_TRUE(dropped(tp, "-tp 2"));
  EXPECT_TRUE(dropped(tp, "--kv-cache-dtype int4"));
}

TEST(SparkVllmImport, CommandLineSplitting) {
  EXPECT_EQ(split_command_line("vllm serve a \\\n  --x 'two words' --y=\"q\\\"t\""),
            (std::vector<std::string>{"vllm", "serve", "a", "--x", "two words", "--y=q\"t"}));
  EXPECT_EQ(to_dns1123_label("Nemotron-3-Nano NVFP4!"), "nemotron-3-nano-nvfp4");
  EXPECT_EQ(to_dns1123_label("___"), "imported");
}

}  // namespace
}  // namespace nibble::recipe
