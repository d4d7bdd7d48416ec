// Relative model paths (controller/recipe/relative_model_path.h): made absolute against the
// applier's directory; absolute paths, hf:// sources and invalid documents pass unchanged.
#include <gtest/gtest.h>

#include "controller/recipe/relative_model_path.h"
#include "controller/recipe/yaml_documents.h"

namespace nibble::recipe {
namespace {

std::string recipe_yaml(const std::string& name, const std::string& source) {
  return "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata:\n  name: " + name +
         "\nspec:\n  model:\n    source: " + source + "\n";
}

TEST(RelativeModelPath, ResolvedAgainstTheApplierDirectory) {
  const std::string text = recipe_yaml("rel", "models/../models/m") + "---\n" +
                           recipe_yaml("abs", "/srv/m") + "---\n" +
                           recipe_yaml("hub", "hf://org/name") + "---\nnot: a recipe\n";
  const std::vector<std::string> docs =
      split_yaml_documents(with_absolute_model_paths(text, "/home/user/work"));
  ASSERT_EQ(docs.size(), 4u);
  const ParseResult rel = parse_model_recipe(docs[0]);
  ASSERT_TRUE(rel.ok()) << rel.error_text();
  EXPECT_EQ(rel.recipe.source.path, "/home/user/work/models/m");
  EXPECT_FALSE(has_relative_model_path(rel.recipe));
  EXPECT_EQ(parse_model_recipe(docs[1]).recipe.source.path, "/srv/m");
  EXPECT_EQ(docs[1], recipe_yaml("abs", "/srv/m"));  // untouched
  EXPECT_EQ(docs[2], recipe_yaml("hub", "hf://org/name"));
  EXPECT_EQ(docs[3], "not: a recipe\n");
  EXPECT_TRUE(has_relative_model_path(parse_model_recipe(recipe_yaml("r", "m")).recipe));
  EXPECT_FALSE(has_relative_model_path(parse_model_recipe(recipe_yaml("h", "hf://o/n")).recipe));
}

}  // namespace
}  // namespace nibble::recipe
