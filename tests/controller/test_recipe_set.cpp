// Recipes applied together: a metadata.name given twice is found, with both documents named.
#include <gtest/gtest.h>

#include "controller/recipe/recipe_set.h"

namespace nibble::recipe {
namespace {

ParseResult named(const std::string& name) {
  return parse_model_recipe(
      "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata: {name: " + name +
      "}\nspec: {model: {source: /m}}\n");
}

TEST(RecipeSet, DuplicateNamesAreFoundWithTheFirstDocument) {
  const std::vector<ParseResult> docs = {named("a"), named("b"), named("a"), named("b"),
                                         named("a")};
  const std::vector<DuplicateName> d = duplicate_names(docs);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].document, 2u);
  EXPECT_EQ(d[0].first_document, 0u);
  EXPECT_EQ(d[0].name, "a");
  EXPECT_EQ(d[1].document, 3u);
  EXPECT_EQ(d[1].first_document, 1u);
  EXPECT_EQ(d[2].document, 4u);
  EXPECT_EQ(d[2].first_document, 0u);
  EXPECT_EQ(d[0].message(),
            "'a' is also the name of document 1 (counting from 1); a recipe may appear only once "
            "in what is applied together");
}

TEST(RecipeSet, DistinctAndNamelessDocumentsPass) {
  EXPECT_TRUE(duplicate_names({named("a"), named("b"), named("c")}).empty());
  const ParseResult nameless = parse_model_recipe("kind: ModelRecipe\n");
  EXPECT_TRUE(duplicate_names({nameless, nameless, named("a")}).empty());
}

}  // namespace
}  // namespace nibble::recipe
