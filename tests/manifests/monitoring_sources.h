#pragma once
// The PromQL the install ships, read from the files users get: the alert rules of
// manifests/monitoring/prometheusrule.yaml (its spec is a Prometheus rules file) and the
// panel and variable queries of manifests/grafana/nibble-dashboard.json.
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/manifests/manifest_tools.h"

namespace nibble::manifests::testing {

inline YAML::Node prometheus_rule() {
  return YAML::LoadFile(source_dir() + "/manifests/monitoring/prometheusrule.yaml");
}

// The PrometheusRule's spec as a rules file for promtool and prometheus.
inline std::string rules_file_text() {
  YAML::Emitter out;
  out << prometheus_rule()["spec"];
  return std::string(out.c_str()) + "\n";
}

struct AlertRule {
  std::string name;
  std::string expr;
  YAML::Node node;
};

inline std::vector<AlertRule> alert_rules() {
  std::vector<AlertRule> out;
  for (const auto& group : prometheus_rule()["spec"]["groups"])
    for (const auto& rule : group["rules"])
      out.push_back({rule["alert"].as<std::string>(), rule["expr"].as<std::string>(), rule});
  return out;
}

inline nlohmann::json dashboard() {
  return nlohmann::json::parse(
      read_text(source_dir() + "/manifests/grafana/nibble-dashboard.json"));
}

struct PanelQuery {
  std::string panel;
  std::string expr;
};

inline std::vector<PanelQuery> dashboard_queries() {
  std::vector<PanelQuery> out;
  const nlohmann::json board = dashboard();
  for (const auto& panel : board["panels"])
    for (const auto& target : panel.value("targets", nlohmann::json::array()))
      out.push_back({panel["title"], target["expr"]});
  return out;
}

// Grafana's variables, as a query would see them with "All" selected.
inline std::string substitute_variables(std::string expr) {
  for (const auto& [from, to] :
       std::vector<std::pair<std::string, std::string>>{{"$__rate_interval", "1m"},
                                                        {"$namespace", ".*"},
                                                        {"$model", ".*"},
                                                        {"$pod", ".*"},
                                                        {"$recipe", ".*"}}) {
    for (std::size_t at; (at = expr.find(from)) != std::string::npos;)
      expr.replace(at, from.size(), to);
  }
  return expr;
}

}  // namespace nibble::manifests::testing
