// ModelRecipe parsing: defaults, every validation error with its field path, unknown fields.
#include <gtest/gtest.h>
#include <algorithm>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "controller/recipe/recipe_parse.h"
#include "controller/recipe/recipe_yaml.h"

namespace nibble::recipe {
namespace {

const char* kFull = R"(
apiVersion: nibble.dev/v1alpha1
kind: ModelRecipe
metadata:
  name: qwen3-30b-a3b
  labels: {team: research}
spec:
  model:
    source: hf://nvidia/Qwen3-30B-A3B-NVFP4@abc123
    servedName: qwen3-30b
  engine:
    maxModelLen: 32768
    maxNumSeqs: 64
    maxNumBatchedTokens: 8192
    kvCacheDtype: fp8
    gpuMemoryUtilization: 0.8
    enablePrefixCaching: false
    extraArgs: ["--threads", "4"]
  replicas: {min: 0, max: 4}
  autoscaling: {metric: inflight, targetPerReplica: 8, scaleDownDelaySeconds: 120}
  placement:
    soloOnly: true
    nodeSelector: {nvidia.com/gpu.product: GB10}
    tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]
)";

bool has_error(const ParseResult& r, const std::string& field, const std::string& part) {
  for (const FieldError& e : r.errors) {
    if (e.field == field && e.message.find(part) != std::string::npos) return true;
  }
  return false;
}

TEST(RecipeParse, FullRecipe) {
  ParseResult r = parse_model_recipe(kFull);
  ASSERT_TRUE(r.ok()) << r.error_text();
  const ModelRecipe& m = r.recipe;
  EXPECT_EQ(m.name, "qwen3-30b-a3b");
  EXPECT_EQ(m.labels.at("team"), "research");
  EXPECT_EQ(m.source.kind, ModelSource::Kind::kHuggingFace);
  EXPECT_EQ(m.source.repo, "nvidia/Qwen3-30B-A3B-NVFP4");
  EXPECT_EQ(m.source.revision, "abc123");
  EXPECT_EQ(m.served_name, "qwen3-30b");
  EXPECT_EQ(*m.engine.max_model_len, 32768);
  EXPECT_EQ(m.engine.max_num_seqs, 64);
  EXPECT_EQ(m.engine.kv_cache_dtype, "fp8");
  EXPECT_FALSE(m.engine.enable_prefix_caching);
  EXPECT_EQ(m.replicas.min, 0);
  EXPECT_EQ(m.replicas.max, 4);
  EXPECT_EQ(m.autoscaling.scale_down_delay_seconds, 120);
  EXPECT_TRUE(m.placement.solo_only);
  EXPECT_EQ(m.placement.node_selector.at("nvidia.com/gpu.product"), "GB10");
  EXPECT_EQ(m.placement.tolerations.at(0).at("operator"), "Exists");
  const std::vector<std::string> args = engine_args(m, "");
  const std::vector<std::string> expected = {"--served-model-name",
                                             "qwen3-30b",
                                             "--max-num-seqs",
                                             "64",
                                             "--kv-cache-dtype",
                                             "fp8",
                                             "--gpu-memory-utilization",
                                             "0.800000",
                                             "--device",
                                             "auto",
                                             "--max-model-len",
                                             "32768",
                                             "--max-num-batched-tokens",
                                             "8192",
                                             "--no-enable-prefix-caching",
                                             "--threads",
                                             "4"};
  EXPECT_EQ(args, expected);
}

TEST(RecipeParse, MinimalRecipeGetsDefaults) {
  ParseResult r = parse_model_recipe(R"({"apiVersion": "nibble.dev/v1alpha1", "kind": "ModelRecipe",
    "metadata": {"name": "demo"}, "spec": {"model": {"source": "/models/demo"}}})");
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_EQ(r.recipe.served_name, "demo");
  EXPECT_EQ(r.recipe.source.kind, ModelSource::Kind::kFile);
  EXPECT_EQ(r.recipe.source.path, "/models/demo");
  EXPECT_EQ(r.recipe.replicas.min, 1);
  EXPECT_EQ(r.recipe.replicas.max, 1);
  EXPECT_EQ(r.recipe.engine.max_num_seqs, 256);
  EXPECT_FALSE(r.recipe.engine.max_model_len.has_value());
  // Unset: the engine picks its device's default step (4,096 on a GPU, 2,048 on the CPU).
  EXPECT_FALSE(r.recipe.engine.max_num_batched_tokens.has_value());
  const std::vector<std::string> args = engine_args(r.recipe, "");
  EXPECT_EQ(std::find(args.begin(), args.end(), "--max-num-batched-tokens"), args.end());
  EXPECT_EQ(r.recipe.autoscaling.metric, "inflight");
}

// spec.replicas.desired is the CRD's scale subresource path (kubectl scale writes it): accepted,
// optional, kept outside [min, max] (the autoscaler clamps it), and written back out.
TEST(RecipeParse, ReplicasDesiredFromTheScaleSubresource) {
  const std::string head =
      "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata: {name: x}\nspec:\n"
      "  model: {source: /m}\n";
  ParseResult r = parse_model_recipe(head + "  replicas: {min: 1, max: 4, desired: 6}\n");
  ASSERT_TRUE(r.ok()) << r.error_text();
  ASSERT_TRUE(r.recipe.replicas.desired.has_value());
  EXPECT_EQ(*r.recipe.replicas.desired, 6);
  const std::string yaml = to_yaml(r.recipe);
  EXPECT_NE(yaml.find("desired: 6"), std::string::npos) << yaml;
  ParseResult again = parse_model_recipe(yaml);
  ASSERT_TRUE(again.ok()) << again.error_text() << yaml;
  EXPECT_EQ(again.recipe.replicas.desired, std::optional<int>(6));

  r = parse_model_recipe(head + "  replicas: {min: 0, max: 2, desired: 0}\n");
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_EQ(r.recipe.replicas.desired, std::optional<int>(0));
  r = parse_model_recipe(head + "  replicas: {min: 1, max: 2}\n");
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_FALSE(r.recipe.replicas.desired.has_value());
  EXPECT_EQ(to_yaml(r.recipe).find("desired"), std::string::npos);
}

// spec.resources: Kubernetes quantities the engine pods request, written back out; anything else
// is refused naming the field.
TEST(RecipeParse, ResourcesAreKubernetesQuantities) {
  const std::string head =
      "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata: {name: x}\nspec:\n"
      "  model: {source: /m}\n";
  ParseResult r =
      parse_model_recipe(head + "  resources: {cpu: 4, memory: 64Gi, ephemeralStorage: '12e9'}\n");
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_EQ(r.recipe.resources.cpu, "4");  // an integer, as kubectl users write it
  EXPECT_EQ(r.recipe.resources.memory, "64Gi");
  EXPECT_EQ(r.recipe.resources.ephemeral_storage, "12e9");
  ParseResult again = parse_model_recipe(to_yaml(r.recipe));
  ASSERT_TRUE(again.ok()) << again.error_text();
  EXPECT_EQ(again.recipe.resources.memory, "64Gi");
  EXPECT_EQ(again.recipe.resources.ephemeral_storage, "12e9");
  EXPECT_EQ(to_yaml(parse_model_recipe(head).recipe).find("resources"), std::string::npos);
  for (const char* bad : {"32 GB", "-1", "4x", "Gi", "1.", "1e", "0.5Kb", "1.5e3Mi"}) {
    r = parse_model_recipe(head + "  resources: {memory: '" + bad + "'}\n");
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error_text().find("spec.resources.memory"), std::string::npos) << bad;
  }
  r = parse_model_recipe(head + "  resources: {gpu: 2}\n");
  EXPECT_NE(r.error_text().find("spec.resources.gpu"), std::string::npos) << r.error_text();
}

// spec.engine.speculativeConfig: vLLM's JSON, checked by the engine's own parser, passed to the
// engine as --speculative-config and written back out as it was.
TEST(RecipeParse, SpeculativeConfigReachesTheEngine) {
  const std::string head =
      "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata: {name: x}\nspec:\n"
      "  model: {source: /m}\n";
  const std::string json = R"({"method": "ngram", "num_speculative_tokens": 4})";
  ParseResult r = parse_model_recipe(head + "  engine: {speculativeConfig: '" + json + "'}\n");
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_EQ(r.recipe.engine.speculative_config, json);
  const std::vector<std::string> args = engine_args(r.recipe, "");
  const auto flag = std::find(args.begin(), args.end(), "--speculative-config");
  ASSERT_NE(flag, args.end());
  ASSERT_NE(flag + 1, args.end());
  // Written again by the controller from the checked fields (test_speculative_recipe.cpp).
  EXPECT_EQ(*(flag + 1), R"({"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":5,)"
                         R"("prompt_lookup_min":5})");
  ParseResult again = parse_model_recipe(to_yaml(r.recipe));
  ASSERT_TRUE(again.ok()) << again.error_text();
  EXPECT_EQ(again.recipe.engine.speculative_config, json);

  r = parse_model_recipe(head + "  engine: {}\n");
  ASSERT_TRUE(r.ok()) << r.error_text();
  const std::vector<std::string> none = engine_args(r.recipe, "");
  EXPECT_EQ(std::find(none.begin(), none.end(), "--speculative-config"), none.end());
}

struct BadCase {
  const char* spec_yaml;  // under spec:, model source added unless the case sets one
  const char* field;
  const char* message_part;
};

TEST(RecipeParse, EveryErrorNamesItsField) {
  const BadCase cases[] = {
      {"model: {source: 'hf://justaname'}", "spec.model.source", "hf://org/name"},
      {"model: {source: 'file://relative'}", "spec.model.source", "absolute path"},
      {"model: {source: 's3://bucket/x'}", "spec.model.source", "unsupported scheme"},
      {"model: {}", "spec.model.source", "is required"},
      {"model: {source: /m, sourse: /n}", "spec.model.sourse", "unknown field"},
      {"model: {source: /m}\nengine: {maxNumSeqs: 0}", "spec.engine.maxNumSeqs",
       "between 1 and 65536"},
      {"model: {source: /m}\nengine: {maxNumSeqs: lots}", "spec.engine.maxNumSeqs", "integer"},
      {"model: {source: /m}\nengine: {kvCacheDtype: int4}", "spec.engine.kvCacheDtype",
       "one of auto, bf16, fp8"},
      {"model: {source: /m}\nengine: {gpuMemoryUtilization: 1.5}",
       "spec.engine.gpuMemoryUtilization", "between"},
      {"model: {source: /m}\nengine: {enablePrefixCaching: maybe}",
       "spec.engine.enablePrefixCaching", "true or false"},
      {"model: {source: /m}\nengine: {extraArgs: --x}", "spec.engine.extraArgs", "list of strings"},
      {"model: {source: /m}\nengine: {speculativeConfig: '{\"method\": \"eagle\", "
       "\"num_speculative_tokens\": 1}'}",
       "spec.engine.speculativeConfig", "not built in nibble-engine"},
      {"model: {source: /m}\nengine: {speculativeConfig: '{\"method\": \"eagle3\", "
       "\"num_speculative_tokens\": 1}'}",
       "spec.engine.speculativeConfig", "eagle3 needs model"},
      {"model: {source: /m}\nengine: {speculativeConfig: '{\"method\": \"draft_model\", "
       "\"model\": \"etc\", \"num_speculative_tokens\": 2}'}",
       "spec.engine.speculativeConfig", "relative path"},
      {"model: {source: /m}\nengine: {speculativeConfig: '{\"method\": \"ngram\"}'}",
       "spec.engine.speculativeConfig", "num_speculative_tokens is required"},
      {"model: {source: /m}\nengine: {maxModelLenn: 4096}", "spec.engine.maxModelLenn",
       "unknown field"},
      {"model: {source: /m}\nreplicas: {min: 3, max: 2}", "spec.replicas.max", "must be >= min"},
      {"model: {source: /m}\nreplicas: {min: -1}", "spec.replicas.min", "between 0 and 1024"},
      {"model: {source: /m}\nreplicas: {desired: 1025}", "spec.replicas.desired",
       "between 0 and 1024"},
      {"model: {source: /m}\nreplicas: {desired: two}", "spec.replicas.desired", "integer"},
      {"model: {source: /m}\nautoscaling: {metric: gpu}", "spec.autoscaling.metric", "one of"},
      {"model: {source: /m}\nautoscaling: {targetPerReplica: 0}",
       "spec.autoscaling.targetPerReplica", "between"},
      {"model: {source: /m}\nplacement: {tolerations: {key: x}}", "spec.placement.tolerations",
       "list"},
      {"model: {source: /m}\nplacement: {tolerations: [{keyy: x}]}",
       "spec.placement.tolerations[0].keyy", "unknown field"},
      {"model: {source: /m}\nreplica: {min: 1}", "spec.replica", "unknown field"},
      {"model: {source: /m}\nengine: [1, 2]", "spec.engine", "must be a mapping"},
  };
  for (const BadCase& c : cases) {
    const std::string text =
        std::string(
            "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata: {name: x}\nspec:\n  ") +
        [&] {
          std::string indented;
          for (char ch : std::string(c.spec_yaml)) {
            indented += ch;
            if (ch == '\n') indented += "  ";
          }
          return indented;
        }();
    ParseResult r = parse_model_recipe(text);
    EXPECT_TRUE(has_error(r, c.field, c.message_part)) << c.spec_yaml << "\n-> " << r.error_text();
  }
}

TEST(RecipeParse, EnvelopeErrors) {
  EXPECT_TRUE(has_error(
      parse_model_recipe(
          "apiVersion: v1\nkind: ModelRecipe\nmetadata: {name: a}\nspec: {model: {source: /m}}"),
      "apiVersion", "nibble.dev/v1alpha1"));
  EXPECT_TRUE(has_error(parse_model_recipe("apiVersion: nibble.dev/v1alpha1\nkind: Pod\nmetadata: "
                                           "{name: a}\nspec: {model: {source: /m}}"),
                        "kind", "ModelRecipe"));
  EXPECT_TRUE(
      has_error(parse_model_recipe("apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata: "
                                   "{name: Bad_Name}\nspec: {model: {source: /m}}"),
                "metadata.name", "DNS-1123"));
  EXPECT_TRUE(has_error(
      parse_model_recipe("apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata: {name: a}"),
      "spec", "is required"));
  EXPECT_FALSE(parse_model_recipe("{unclosed: [").ok());
  EXPECT_FALSE(parse_model_recipe("- just\n- a list").ok());
  EXPECT_FALSE(parse_model_recipe("").ok());
  EXPECT_FALSE(
      parse_model_recipe("{[1, 2]: x, apiVersion: nibble.dev/v1alpha1}").ok());  // non-string key
}

TEST(RecipeParse, Dns1123Labels) {
  EXPECT_TRUE(is_dns1123_label("a"));
  EXPECT_TRUE(is_dns1123_label("llama-3-1-8b"));
  EXPECT_FALSE(is_dns1123_label("-a"));
  EXPECT_FALSE(is_dns1123_label("a-"));
  EXPECT_FALSE(is_dns1123_label("A"));
  EXPECT_FALSE(is_dns1123_label("a.b"));
  EXPECT_FALSE(is_dns1123_label(std::string(64, 'a')));
}

// Every example recipe the docs point to parses without a problem.
TEST(RecipeParse, ExamplesAreValid) {
  int checked = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(NIBBLE_SOURCE_DIR) + "/examples/recipes")) {
    if (entry.path().extension() != ".yaml") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const ParseResult r = parse_model_recipe(text.str());
    EXPECT_TRUE(r.ok()) << entry.path() << ":\n" << r.error_text();
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

}  // namespace
}  // namespace nibble::recipe
