// `nibble scale`: spec.replicas.desired set within [min, max], the rest of the recipe kept.
#include <gtest/gtest.h>

#include "controller/recipe/recipe_parse.h"
#include "controller/recipe/recipe_scale.h"
#include "controller/recipe/recipe_yaml.h"

namespace nibble::recipe {
namespace {

const char* kRecipe = R"(apiVersion: nibble.dev/v1alpha1
kind: ModelRecipe
metadata:
  name: chat
spec:
  model:
    source: /models/chat
  engine:
    maxNumSeqs: 8
  replicas: {min: 1, max: 3}
  autoscaling: {enabled: false}
)";

TEST(RecipeScale, SetsDesiredAndKeepsTheRest) {
  const ScaleResult r = scale_recipe(kRecipe, 3);
  ASSERT_EQ(r.error, "");
  EXPECT_FALSE(r.autoscaling);
  const ParseResult scaled = parse_model_recipe(r.yaml);
  ASSERT_TRUE(scaled.ok()) << scaled.error_text();
  EXPECT_EQ(scaled.recipe.replicas.desired, 3);
  ParseResult before = parse_model_recipe(kRecipe);
  before.recipe.replicas.desired = 3;
  EXPECT_EQ(to_yaml(before.recipe), r.yaml);
}

TEST(RecipeScale, RefusesCountsOutsideTheBoundsAndInvalidRecipes) {
  EXPECT_EQ(scale_recipe(kRecipe, 4).error,
            "replicas 4 is outside spec.replicas [min 1, max 3]; change spec.replicas with "
            "nibble apply");
  EXPECT_NE(scale_recipe(kRecipe, 0).error, "");
  EXPECT_EQ(scale_recipe(kRecipe, 4).yaml, "");
  EXPECT_NE(scale_recipe("kind: ModelRecipe\n", 1).error.find("invalid"), std::string::npos);
  std::string autoscaled = kRecipe;
  autoscaled.replace(autoscaled.find("{enabled: false}"), 16, "{enabled: true}");
  EXPECT_TRUE(scale_recipe(autoscaled, 2).autoscaling);
}

}  // namespace
}  // namespace nibble::recipe
