// `nibble get` / `nibble describe` output, as text.
#include <gtest/gtest.h>

#include "controller/cli/recipe_printer.h"

namespace nibble::cli {
namespace {

nlohmann::json status_json() {
  return nlohmann::json::parse(R"({
    "name": "demo", "servedName": "demo-chat", "phase": "Progressing",
    "desiredReplicas": 2, "replicas": 2, "readyReplicas": 1,
    "generation": 3, "observedGeneration": 3, "endpoint": "http://localhost:8000/v1",
    "lastError": "", "autoscaler": "inflight=12 target=8 current=1 -> scale up to 2",
    "conditions": [
      {"type": "Ready", "status": "True", "reason": "ReplicasAvailable", "message": "1/2 replicas ready", "lastTransitionTime": "2026-11-23T10:00:00Z"},
      {"type": "Progressing", "status": "True", "reason": "ScalingUp", "message": "1 of 2 replicas ready with generation 3\nsecond line", "lastTransitionTime": "2026-11-23T10:01:00Z"},
      {"type": "Degraded", "status": "False", "reason": "AsExpected", "message": "", "lastTransitionTime": "2026-11-23T10:00:00Z"}],
    "engines": [{"id": "demo-bc2d4", "phase": "Ready", "pid": 4242, "port": 40001, "upToDate": true, "logFile": "/s/logs/demo-bc2d4.log"}]
  })");
}

TEST(RecipePrinter, TableAlignsColumnsLikeKubectl) {
  nlohmann::json items = nlohmann::json::array({status_json()});
  items.push_back({{"name", "a-much-longer-name"},
                   {"servedName", "x"},
                   {"phase", "Invalid"},
                   {"readyReplicas", 0},
                   {"desiredReplicas", 0},
                   {"endpoint", ""}});
  EXPECT_EQ(format_recipe_table(items, false),
            "NAME                 MODEL       PHASE         READY   ENDPOINT\n"
            "demo                 demo-chat   Progressing   1/2     http://localhost:8000/v1\n"
            "a-much-longer-name   x           Invalid       0/0\n");
  const std::string wide = format_recipe_table(nlohmann::json::array({status_json()}), true);
  EXPECT_NE(wide.find("GENERATION"), std::string::npos);
  EXPECT_NE(wide.find("3/3"), std::string::npos);
  // The first line of the Progressing message explains the row.
  EXPECT_NE(wide.find("ScalingUp: 1 of 2 replicas ready with generation 3\n"), std::string::npos)
      << wide;
  EXPECT_EQ(format_recipe_table(nlohmann::json::array(), false), "No recipes found.\n");
}

TEST(RecipePrinter, DescribeShowsConditionsEnginesAndSpec) {
  const std::string text = format_recipe_description(status_json(), "kind: ModelRecipe\n");
  EXPECT_NE(text.find("Name:               demo\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Replicas:           2 desired | 2 total | 1 ready\n"), std::string::npos);
  EXPECT_NE(text.find("  Progressing   True     ScalingUp"), std::string::npos) << text;
  EXPECT_NE(text.find("generation 3;second line"), std::string::npos);  // one row per condition
  EXPECT_NE(text.find("  demo-bc2d4   Ready   4242   40001   yes          /s/logs/demo-bc2d4.log"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Spec:\n  kind: ModelRecipe\n"), std::string::npos);
  EXPECT_EQ(text.find("Last error"), std::string::npos);  // only when there is one
}

}  // namespace
}  // namespace nibble::cli
