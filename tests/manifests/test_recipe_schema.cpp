// The ModelRecipe CRD's schema (manifests/crds) and the controller's own validation
// (controller/recipe) must judge recipes alike: every example and edge recipe passes both;
// every broken recipe of tests/manifests/recipes/broken/ fails both, each with the error its
// header names (`# crd:` for the API server's view, `# controller:` for Kubernetes mode:
// parse_model_recipe, then recipe_objects' RenderError).
// The CEL rules are evaluated by cel-js after the schema's defaults are applied, as the API
// server would; check_recipe_schema.mjs also fails when a CEL rule has no broken recipe.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <vector>

#include "controller/kube/recipe_objects.h"
#include "controller/recipe/recipe_parse.h"
#include "tests/manifests/manifest_tools.h"

namespace nibble::manifests {
namespace {

using testing::read_text;
using testing::source_dir;

std::vector<std::filesystem::path> recipes_in(const std::string& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(source_dir() + "/" + dir))
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The text after `# KEY: ` in a recipe's header, or "".
std::string header(const std::string& text, const std::string& key) {
  std::smatch m;
  if (std::regex_search(text, m, std::regex("(^|\n)# " + key + ": ([^\n]+)"))) return m[2];
  return "";
}

TEST(RecipeSchema, CrdAcceptsEveryExampleAndRejectsEveryBrokenRecipe) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  auto r =
      tools.script("check_recipe_schema.mjs",
                   source_dir() + "/manifests/crds/nibble.dev_modelrecipes.yaml " + source_dir() +
                       "/examples/recipes " + source_dir() + "/tests/manifests/recipes/valid -- " +
                       source_dir() + "/tests/manifests/recipes/broken");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("all recipe schema checks passed"), std::string::npos) << r.output;
  // Every broken recipe and every CEL rule was looked at.
  const auto broken = recipes_in("tests/manifests/recipes/broken").size();
  std::size_t rejected = 0, rules = 0;
  for (std::size_t at = 0; (at = r.output.find(": rejected (", at)) != std::string::npos; ++at)
    ++rejected;
  for (std::size_t at = 0; (at = r.output.find("ok CEL rule at ", at)) != std::string::npos; ++at)
    ++rules;
  EXPECT_EQ(rejected, broken) << r.output;
  EXPECT_EQ(rules, 7u) << r.output;
}

// What the controller in Kubernetes mode refuses: the recipe's validation, then what cannot be
// rendered into a pod (kube::RenderError). "" when it takes the recipe.
std::string kubernetes_mode_errors(const std::string& text) {
  const auto result = recipe::parse_model_recipe(text);
  if (!result.ok()) return result.error_text();
  try {
    kube::recipe_objects(result.recipe, "rev", 1, {}, {});
  } catch (const kube::RenderError& e) {
    return e.what();
  }
  return "";
}

TEST(RecipeSchema, ControllerValidationRejectsEveryBrokenRecipe) {
  const auto broken = recipes_in("tests/manifests/recipes/broken");
  ASSERT_GE(broken.size(), 30u);
  for (const auto& file : broken) {
    const std::string text = read_text(file);
    const std::string expected = header(text, "controller");
    ASSERT_FALSE(expected.empty()) << file << " has no '# controller: TEXT' line";
    const std::string errors = kubernetes_mode_errors(text);
    EXPECT_FALSE(errors.empty()) << file << " is accepted by the controller";
    EXPECT_NE(errors.find(expected), std::string::npos)
        << file << ": expected '" << expected << "', got:\n"
        << errors;
  }
}

TEST(RecipeSchema, ControllerValidationAcceptsEveryRecipeTheCrdAccepts) {
  auto files = recipes_in("examples/recipes");
  const auto edges = recipes_in("tests/manifests/recipes/valid");
  files.insert(files.end(), edges.begin(), edges.end());
  ASSERT_GE(files.size(), 7u);
  for (const auto& file : files) {
    const std::string text = read_text(file);
    if (text.starts_with("# local mode only")) continue;  // check_recipe_schema.mjs skips it too
    EXPECT_EQ(kubernetes_mode_errors(text), "") << file;
  }
}

}  // namespace
}  // namespace nibble::manifests
