// Admission at apply (controller/store/recipe_admission.h): a served name another recipe serves
// and recipes beyond --max-recipes are refused against what the store holds; updates of stored
// recipes are always admitted.
#include <gtest/gtest.h>

#include "controller/store/recipe_admission.h"
#include "controller/store/recipe_file_store.h"
#include "tests/support/temp_dir.h"

namespace nibble::store {
namespace {

std::string recipe_yaml(const std::string& name, const std::string& served_name = "") {
  return "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata:\n  name: " + name +
         "\nspec:\n  model:\n    source: /models/" + name + "\n" +
         (served_name.empty() ? "" : "    servedName: " + served_name + "\n");
}

std::vector<recipe::ParseResult> parse_all(const std::vector<std::string>& docs) {
  std::vector<recipe::ParseResult> out;
  for (const std::string& d : docs) out.push_back(recipe::parse_model_recipe(d));
  return out;
}

TEST(RecipeAdmission, ServedNameOfAnotherRecipeIsAConflictNamingIt) {
  nibble::testing::TempDir dir;
  RecipeFileStore store(dir.path());
  store.apply(recipe_yaml("qwen-a", "qwen"));
  store.apply(recipe_yaml("llama"));  // served as "llama", its name

  auto errors = admission_errors(store.load(), parse_all({recipe_yaml("qwen-b", "qwen")}), 1000);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].kind, AdmissionError::Kind::kServedNameTaken);
  EXPECT_EQ(errors[0].http_status(), 409);
  EXPECT_EQ(errors[0].name, "qwen-b");
  EXPECT_EQ(errors[0].field, "spec.model.servedName");
  EXPECT_NE(errors[0].message.find("'qwen' is already served by recipe 'qwen-a'"),
            std::string::npos)
      << errors[0].message;
  // The default served name (metadata.name) collides the same way.
  errors = admission_errors(store.load(), parse_all({recipe_yaml("other", "llama")}), 1000);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].message.find("recipe 'llama'"), std::string::npos) << errors[0].message;
  // Re-applying a recipe keeps its own name; moving the name in the same apply is fine.
  EXPECT_TRUE(
      admission_errors(store.load(), parse_all({recipe_yaml("qwen-a", "qwen")}), 1000).empty());
  EXPECT_TRUE(admission_errors(
                  store.load(),
                  parse_all({recipe_yaml("qwen-a", "qwen-old"), recipe_yaml("qwen-b", "qwen")}),
                  1000)
                  .empty());
  // Two new documents of one apply claiming one name: the second is refused.
  errors = admission_errors(store.load(),
                            parse_all({recipe_yaml("x", "same"), recipe_yaml("y", "same")}), 1000);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].document, 1u);
  EXPECT_NE(errors[0].message.find("recipe 'x'"), std::string::npos) << errors[0].message;
}

TEST(RecipeAdmission, RecipeCountIsBoundedForNewRecipesOnly) {
  nibble::testing::TempDir dir;
  RecipeFileStore store(dir.path());
  store.apply(recipe_yaml("a"));
  store.apply(recipe_yaml("b"));
  EXPECT_TRUE(admission_errors(store.load(), parse_all({recipe_yaml("c")}), 3).empty());
  auto errors = admission_errors(
      store.load(), parse_all({recipe_yaml("a"), recipe_yaml("c"), recipe_yaml("d")}), 3);
  ASSERT_EQ(errors.size(), 2u);  // c and d, the new ones; a is an update
  EXPECT_EQ(errors[0].kind, AdmissionError::Kind::kTooManyRecipes);
  EXPECT_EQ(errors[0].http_status(), 403);
  EXPECT_EQ(errors[0].name, "c");
  EXPECT_EQ(errors[1].name, "d");
  EXPECT_NE(errors[0].message.find("holds 2 recipes and this apply adds 2, beyond its limit of 3"),
            std::string::npos)
      << errors[0].message;
  EXPECT_NE(errors[0].message.find("--max-recipes"), std::string::npos);
  // At the limit, updates still go through.
  EXPECT_TRUE(admission_errors(store.load(), parse_all({recipe_yaml("a", "new-name")}), 2).empty());
}

}  // namespace
}  // namespace nibble::store
