// spec.engine.speculativeConfig in recipes: draft_model's model (and eagle3's head) is a model
// source checked as
// spec.model.source is (hf://, file:///, an absolute path; no "..", no relative path), confined
// to --model-root with symlinks resolved, and the engine gets JSON the controller writes from
// the checked fields, never the recipe's text.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

#include "controller/recipe/speculative_recipe.h"
#include "controller/store/recipe_store.h"
#include "engine/spec/speculative_config.h"
#include "tests/support/temp_dir.h"

namespace nibble::recipe {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string recipe_with(const std::string& speculative_json) {
  return "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata: {name: x}\nspec:\n"
         "  model: {source: /models/target}\n  engine:\n    speculativeConfig: '" +
         speculative_json + "'\n";
}

std::string draft_json(const std::string& model) {
  return json{{"method", "draft_model"}, {"model", model}, {"num_speculative_tokens", 3}}.dump();
}

ParseResult parse_draft(const std::string& model) {
  return parse_model_recipe(recipe_with(draft_json(model)));
}

// The value of --speculative-config in a replica's arguments, "" when absent.
std::string speculative_arg(const ModelRecipe& r, const std::string& draft_dir) {
  const std::vector<std::string> args = engine_args(r, draft_dir);
  const auto flag = std::find(args.begin(), args.end(), "--speculative-config");
  if (flag == args.end() || flag + 1 == args.end()) return "";
  return *(flag + 1);
}

TEST(SpeculativeRecipe, DraftModelSourcesAreReadAsSpecModelSourceIs) {
  ParseResult hub = parse_draft("hf://Qwen/Qwen3-0.6B@v1");
  ASSERT_TRUE(hub.ok()) << hub.error_text();
  ASSERT_TRUE(hub.recipe.engine.draft_model);
  EXPECT_EQ(hub.recipe.engine.draft_model->kind, ModelSource::Kind::kHuggingFace);
  EXPECT_EQ(hub.recipe.engine.draft_model->repo, "Qwen/Qwen3-0.6B");
  EXPECT_EQ(hub.recipe.engine.draft_model->revision, "v1");

  for (const char* local : {"/models/qwen3-0.6b", "file:///models/qwen3-0.6b"}) {
    ParseResult r = parse_draft(local);
    ASSERT_TRUE(r.ok()) << local << ": " << r.error_text();
    ASSERT_TRUE(r.recipe.engine.draft_model);
    EXPECT_EQ(r.recipe.engine.draft_model->kind, ModelSource::Kind::kFile);
    EXPECT_EQ(r.recipe.engine.draft_model->path, "/models/qwen3-0.6b");
  }

  ParseResult ngram =
      parse_model_recipe(recipe_with(R"({"method":"ngram","num_speculative_tokens":2})"));
  ASSERT_TRUE(ngram.ok()) << ngram.error_text();
  EXPECT_FALSE(ngram.recipe.engine.draft_model);
}

TEST(SpeculativeRecipe, DraftPathsThatCouldReachOtherFilesAreRefused) {
  struct Case {
    const char* model;
    const char* message_part;
  };
  const Case cases[] = {
      {"Qwen/Qwen3-0.6B", "relative path; write hf://org/name"},  // vLLM's Hub id, or a dir?
      {"models/draft", "relative path"},
      {"../etc", "relative path"},
      {"/models/../etc", "has a '..' part"},
      {"/models/draft/../../etc/passwd", "has a '..' part"},
      {"file:///models/../../etc", "has a '..' part"},
      {"file://models", "file:// needs an absolute path"},
      {"s3://bucket/draft", "unsupported scheme"},
      {"hf://../..", "must not be '.' or contain '..'"},
      {"hf://org/..", "must not be '.' or contain '..'"},
      {"hf://org/name@..", "must not be '.' or contain '..'"},
      {"hf://org/name@../../etc", "must not be '.' or contain '..'"},
      {"hf://justaname", "is not hf://org/name"},
  };
  for (const Case& c : cases) {
    const ParseResult r = parse_draft(c.model);
    ASSERT_EQ(r.errors.size(), 1u) << c.model << ": " << r.error_text();
    EXPECT_EQ(r.errors[0].field, "spec.engine.speculativeConfig") << c.model;
    EXPECT_TRUE(r.errors[0].message.starts_with("draft_model's model: ")) << r.errors[0].message;
    EXPECT_NE(r.errors[0].message.find(c.message_part), std::string::npos)
        << c.model << ": " << r.errors[0].message;
  }
}

// Other keys, values of the wrong type and flags in values are the engine parser's to refuse.
TEST(SpeculativeRecipe, KeysTheEngineDoesNotKnowAreRefused) {
  const char* texts[] = {
      R"({"method":"draft_model","model":"/m","num_speculative_tokens":2,"api_key_file":"/etc/shadow"})",
      R"({"method":"draft_model","model":["/m"],"num_speculative_tokens":2})",
      R"({"method":"draft_model","num_speculative_tokens":2})",
      R"({"method":"ngram","model":"/etc","num_speculative_tokens":2})",
      R"({"method":"draft_model","model":"/m","num_speculative_tokens":2} --api-key-file /x)",
  };
  for (const char* text : texts) {
    const ParseResult r = parse_model_recipe(recipe_with(text));
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.errors[0].field, "spec.engine.speculativeConfig") << text;
  }
}

TEST(SpeculativeRecipe, TheEngineGetsJsonWrittenFromTheCheckedFields) {
  ParseResult ngram =
      parse_model_recipe(recipe_with(R"({"num_speculative_tokens": 4, "method": "ngram"})"));
  ASSERT_TRUE(ngram.ok()) << ngram.error_text();
  EXPECT_EQ(
      json::parse(speculative_arg(ngram.recipe, "")),
      json::parse(
          R"({"method":"ngram","num_speculative_tokens":4,"prompt_lookup_min":5,"prompt_lookup_max":5})"));

  ParseResult mtp =
      parse_model_recipe(recipe_with(R"({"method": "mtp", "num_speculative_tokens": 2})"));
  ASSERT_TRUE(mtp.ok()) << mtp.error_text();
  EXPECT_EQ(json::parse(speculative_arg(mtp.recipe, "")),
            json::parse(R"({"method":"mtp","num_speculative_tokens":2})"));

  ParseResult draft = parse_draft("hf://Qwen/Qwen3-0.6B");
  ASSERT_TRUE(draft.ok()) << draft.error_text();
  const std::string placed = "/models/models--Qwen--Qwen3-0.6B/main";
  EXPECT_EQ(json::parse(speculative_arg(draft.recipe, placed)),
            json::parse(R"({"method":"draft_model","num_speculative_tokens":3,"model":")" + placed +
                        "\"}"));
  // The engine's own parser reads back exactly those fields.
  const spec::SpeculativeConfig back =
      spec::parse_speculative_config(speculative_arg(draft.recipe, placed));
  EXPECT_EQ(back.method, spec::SpecMethod::kDraftModel);
  EXPECT_EQ(back.model, placed);
  EXPECT_EQ(back.num_speculative_tokens, 3);
  // Without a placed directory there is no flag to write.
  EXPECT_THROW(engine_args(draft.recipe, ""), std::invalid_argument);
}

// eagle3's head is weights the engine reads as draft_model's are: the same source rules, the same
// confinement to --model-root, and JSON written from the checked fields with the placed directory.
TEST(SpeculativeRecipe, Eagle3HeadsAreSourcesAsDraftModelsAre) {
  const auto eagle3 = [](const std::string& model) {
    return json{{"method", "eagle3"}, {"model", model}, {"num_speculative_tokens", 4}}.dump();
  };
  ParseResult hub =
      parse_model_recipe(recipe_with(eagle3("hf://yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")));
  ASSERT_TRUE(hub.ok()) << hub.error_text();
  ASSERT_TRUE(hub.recipe.engine.draft_model);
  EXPECT_EQ(hub.recipe.engine.draft_model->kind, ModelSource::Kind::kHuggingFace);
  EXPECT_EQ(hub.recipe.engine.draft_model->repo, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B");
  const std::string placed = "/models/models--yuhuili--EAGLE3-LLaMA3.1-Instruct-8B/main";
  EXPECT_EQ(
      json::parse(speculative_arg(hub.recipe, placed)),
      json::parse(R"({"method":"eagle3","num_speculative_tokens":4,"model":")" + placed + "\"}"));
  const spec::SpeculativeConfig back =
      spec::parse_speculative_config(speculative_arg(hub.recipe, placed));
  EXPECT_EQ(back.method, spec::SpecMethod::kEagle3);
  EXPECT_EQ(back.model, placed);
  EXPECT_THROW(engine_args(hub.recipe, ""), std::invalid_argument);

  for (const char* bad : {"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "/models/../etc"}) {
    const ParseResult r = parse_model_recipe(recipe_with(eagle3(bad)));
    ASSERT_EQ(r.errors.size(), 1u) << bad << ": " << r.error_text();
    EXPECT_EQ(r.errors[0].field, "spec.engine.speculativeConfig");
    EXPECT_TRUE(r.errors[0].message.starts_with("eagle3's model: ")) << r.errors[0].message;
  }

  nibble::testing::TempDir dir;
  const fs::path root = dir.path() / "models";
  fs::create_directories(root / "head");
  fs::create_directories(dir.path() / "outside");
  const auto validate = [&](const std::string& head) {
    const std::string text =
        "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata: {name: x}\nspec:\n"
        "  model: {source: " +
        (root / "target").string() + "}\n  engine:\n    speculativeConfig: '" + eagle3(head) +
        "'\n";
    return store::validate_recipe(text, root);
  };
  EXPECT_TRUE(validate((root / "head").string()).ok());
  const ParseResult outside = validate((dir.path() / "outside").string());
  ASSERT_EQ(outside.errors.size(), 1u) << outside.error_text();
  EXPECT_NE(outside.errors[0].message.find("outside the controller's --model-root"),
            std::string::npos)
      << outside.errors[0].message;
}

// A path that is a valid absolute path but looks like JSON or a flag stays one string value.
TEST(SpeculativeRecipe, APathCannotAddKeysOrFlags) {
  const std::string odd = R"(/models/d", "prompt_lookup_max": 9, "x": " --api-key-file /k)";
  ParseResult r = parse_draft(odd);
  ASSERT_TRUE(r.ok()) << r.error_text();
  const std::vector<std::string> args = engine_args(r.recipe, odd);
  EXPECT_EQ(std::count(args.begin(), args.end(), "--api-key-file"), 0);
  const json written = json::parse(speculative_arg(r.recipe, odd));
  EXPECT_EQ(written.size(), 3u) << written.dump();
  EXPECT_EQ(written["model"], odd);
}

TEST(SpeculativeRecipe, TheDraftIsConfinedToTheModelRoot) {
  nibble::testing::TempDir dir;
  const fs::path root = dir.path() / "models";
  fs::create_directories(root / "draft");
  fs::create_directories(dir.path() / "outside");
  fs::create_symlink(dir.path() / "outside", root / "link-out");
  const std::string resolved_root = fs::canonical(root).string();
  const auto validate = [&](const std::string& draft) {
    // The target model inside the root, so that only the draft can be refused.
    const std::string text =
        "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata: {name: x}\nspec:\n"
        "  model: {source: " +
        (root / "target").string() + "}\n  engine:\n    speculativeConfig: '" + draft_json(draft) +
        "'\n";
    return store::validate_recipe(text, root);
  };
  EXPECT_TRUE(validate((root / "draft").string()).ok());
  EXPECT_TRUE(validate("file://" + (root / "draft").string()).ok());
  EXPECT_TRUE(validate("hf://Qwen/Qwen3-0.6B").ok());  // downloads go to the cache

  const ParseResult outside = validate((dir.path() / "outside").string());
  ASSERT_EQ(outside.errors.size(), 1u) << outside.error_text();
  EXPECT_EQ(outside.errors[0].field, "spec.engine.speculativeConfig");
  EXPECT_NE(
      outside.errors[0].message.find("outside the controller's --model-root " + resolved_root),
      std::string::npos)
      << outside.errors[0].message;

  const ParseResult link = validate((root / "link-out" / "draft").string());
  ASSERT_EQ(link.errors.size(), 1u) << link.error_text();
  EXPECT_EQ(link.errors[0].field, "spec.engine.speculativeConfig");
  EXPECT_NE(link.errors[0].message.find("resolves to " +
                                        (fs::canonical(dir.path() / "outside") / "draft").string()),
            std::string::npos)
      << link.errors[0].message;

  EXPECT_FALSE(validate("/").ok());
  EXPECT_FALSE(validate(root.string() + "-evil").ok());  // a look-alike prefix
  // ".." is refused even where it would stay inside.
  EXPECT_FALSE(validate((root / "draft" / ".." / "draft").string()).ok());
}

TEST(SpeculativeRecipe, ADifferentDraftIsADifferentRevision) {
  const ParseResult a = parse_draft("hf://Qwen/Qwen3-0.6B");
  const ParseResult b = parse_draft("hf://Qwen/Qwen3-1.7B");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(store::spec_hash(a.recipe), store::spec_hash(b.recipe));
  EXPECT_EQ(store::spec_hash(a.recipe),
            store::spec_hash(parse_draft("hf://Qwen/Qwen3-0.6B").recipe));
}

}  // namespace
}  // namespace nibble::recipe
