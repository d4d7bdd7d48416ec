// The Grafana dashboard's structure, which Grafana itself would only show as a broken panel:
// unique panel ids, panels inside the 24-column grid and not overlapping, every query on the
// dashboard's data source variable, every $variable defined, and every {{label}} a legend names
// kept by the query's aggregation (else the legend renders empty). That each query returns
// data is test_promql_live's job.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "tests/manifests/monitoring_sources.h"

namespace nibble::manifests {
namespace {

using nlohmann::json;

const json& board() {
  static const json b = testing::dashboard();
  return b;
}

TEST(Dashboard, PanelsTileTheGridWithUniqueIds) {
  std::set<int> ids;
  struct Box {
    int x, y, w, h;
    std::string title;
  };
  std::vector<Box> boxes;
  for (const auto& p : board()["panels"]) {
    EXPECT_TRUE(ids.insert(p["id"].get<int>()).second) << "duplicate id " << p["id"];
    const auto& g = p["gridPos"];
    const Box b{g["x"], g["y"], g["w"], g["h"], p["title"]};
    EXPECT_GE(b.x, 0) << b.title;
    EXPECT_LE(b.x + b.w, 24) << b.title;
    for (const Box& o : boxes) {
      const bool apart =
          b.x + b.w <= o.x || o.x + o.w <= b.x || b.y + b.h <= o.y || o.y + o.h <= b.y;
      EXPECT_TRUE(apart) << b.title << " overlaps " << o.title;
    }
    boxes.push_back(b);
  }
  EXPECT_GE(boxes.size(), 20u);
}

TEST(Dashboard, QueriesUseDefinedVariablesAndTheDataSourceVariable) {
  std::set<std::string> defined = {"__rate_interval"};
  for (const auto& v : board()["templating"]["list"]) defined.insert(v["name"].get<std::string>());
  const std::regex variable(R"(\$\{?([A-Za-z_]+)\}?)");
  for (const auto& p : board()["panels"]) {
    if (p["type"] == "row") continue;
    EXPECT_EQ(p["datasource"]["uid"], "${datasource}") << p["title"];
    EXPECT_FALSE(p["targets"].empty()) << p["title"];
    for (const auto& t : p["targets"]) {
      EXPECT_EQ(t["datasource"]["uid"], "${datasource}") << p["title"];
      const std::string expr = t["expr"];
      for (std::sregex_iterator it(expr.begin(), expr.end(), variable), end; it != end; ++it)
        EXPECT_TRUE(defined.count((*it)[1])) << p["title"] << ": $" << (*it)[1] << " undefined";
    }
  }
}

TEST(Dashboard, LegendLabelsSurviveTheAggregation) {
  const std::regex legend_label(R"(\{\{ *([a-z_]+) *\}\})");
  const std::regex by_clause(R"(by \(([a-z_, ]+)\))");
  int checked = 0;
  for (const auto& q : board()["panels"]) {
    for (const auto& t : q.value("targets", json::array())) {
      const std::string expr = t["expr"], legend = t.value("legendFormat", "");
      // Labels kept: those of the first `by (...)` (the outermost aggregation of the query).
      std::smatch by;
      if (!std::regex_search(expr, by, by_clause)) continue;
      const std::string kept = by[1];
      for (std::sregex_iterator it(legend.begin(), legend.end(), legend_label), end; it != end;
           ++it) {
        ++checked;
        EXPECT_NE(kept.find((*it)[1]), std::string::npos)
            << q["title"] << ": legend {{" << (*it)[1] << "}} but the query keeps (" << kept
            << "): " << expr;
      }
    }
  }
  EXPECT_GE(checked, 30);
}

}  // namespace
}  // namespace nibble::manifests
