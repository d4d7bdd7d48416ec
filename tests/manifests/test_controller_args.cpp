// The controller container's args in the kustomize install and the Helm chart, run through the
// real nibble-controller options parser (--check-options: parse, validate, start nothing), so a
// renamed flag or a value form the parser does not take breaks here, not in a cluster.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "tests/manifests/manifest_tools.h"
#include "tests/support/temp_dir.h"

namespace nibble::manifests {
namespace {

using testing::read_text;

// The args of the "controller" container of the controller Deployment in a rendered install.
std::vector<std::string> controller_args(const std::string& install_yaml) {
  std::vector<std::string> args;
  for (const YAML::Node& doc : YAML::LoadAll(install_yaml)) {
    if (!doc.IsMap() || doc["kind"].as<std::string>("") != "Deployment") continue;
    for (const YAML::Node& c : doc["spec"]["template"]["spec"]["containers"]) {
      if (c["name"].as<std::string>("") != "controller") continue;
      for (const YAML::Node& a : c["args"]) args.push_back(a.as<std::string>());
    }
  }
  return args;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

nibble::testing::CommandResult check_options(const std::vector<std::string>& args) {
  std::string command = NIBBLE_CONTROLLER;
  for (const std::string& a : args) command += " " + shell_quote(a);
  return nibble::testing::run_command(command + " --check-options 2>&1");
}

TEST(ControllerArgs, KustomizeDeploymentArgsParse) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  nibble::testing::TempDir dir;
  const std::string out = (dir.path() / "install.yaml").string();
  ASSERT_EQ(tools.kustomize("manifests", out).exit_code, 0) << read_text(out + ".err");
  const std::vector<std::string> args = controller_args(read_text(out));
  ASSERT_GE(args.size(), 5u) << read_text(out);
  const auto r = check_options(args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("backend=kubernetes leader-elect=true "
                          "engine-image=nibble/nibble-engine:0.1.0 host=0.0.0.0 port=8000 "
                          "state-dir=/var/lib/nibble log-level=info"),
            std::string::npos)
      << r.output;
}

// The ENDPOINT column of docs/kubernetes.md §4 is what this install writes into status.endpoint
// (the controller's --endpoint: the router Service's URL), not a made-up value.
TEST(ControllerArgs, StatusEndpointIsTheRouterServiceAndTheDocsShowIt) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  nibble::testing::TempDir dir;
  const std::string out = (dir.path() / "install.yaml").string();
  ASSERT_EQ(tools.kustomize("manifests", out).exit_code, 0) << read_text(out + ".err");
  const auto r = check_options(controller_args(read_text(out)));
  const std::string endpoint = "http://nibble-controller.nibble-system.svc:8000/v1";
  EXPECT_NE(r.output.find("endpoint=" + endpoint + " "), std::string::npos) << r.output;
  const std::string docs = read_text(testing::source_dir() + "/docs/kubernetes.md");
  const auto sample = docs.find("# qwen3-30b-a3b   qwen3-30b   1       1         Ready");
  ASSERT_NE(sample, std::string::npos) << "docs/kubernetes.md §4 has no Ready sample line";
  const std::string line = docs.substr(sample, docs.find('\n', sample) - sample);
  EXPECT_NE(line.find(" " + endpoint + " "), std::string::npos) << line;
}

TEST(ControllerArgs, HelmDeploymentArgsParseAndCarryTheValues) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  nibble::testing::TempDir dir;
  const std::string out = (dir.path() / "helm.yaml").string();
  ASSERT_EQ(tools
                .helm_template("--set controller.leaderElection=false "
                               "--set controller.logLevel=debug",
                               out)
                .exit_code,
            0)
      << read_text(out + ".err");
  const auto r = check_options(controller_args(read_text(out)));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // --leader-elect=false must switch it off, not on.
  EXPECT_NE(r.output.find("backend=kubernetes leader-elect=false "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("log-level=debug"), std::string::npos) << r.output;
}

// Gated models and the model cache (issue 43): the overlay's and the chart's engine flags are
// flags the controller takes, and they reach its render options.
TEST(ControllerArgs, GatedModelsAndModelCacheFlagsParse) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  nibble::testing::TempDir dir;
  const std::string kustomized = (dir.path() / "install.yaml").string();
  ASSERT_EQ(tools.kustomize("manifests/overlays/gated-models", kustomized).exit_code, 0)
      << read_text(kustomized + ".err");
  const char* expected = "engine pods: hf-token-secret=hf-token model-cache=pvc/nibble-models";
  auto r = check_options(controller_args(read_text(kustomized)));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(expected), std::string::npos) << r.output;

  const std::string helm = (dir.path() / "helm.yaml").string();
  ASSERT_EQ(tools
                .helm_template("--set engine.hfTokenSecret=hf-token "
                               "--set engine.modelCache.hostPath=/var/lib/nibble-models",
                               helm)
                .exit_code,
            0)
      << read_text(helm + ".err");
  r = check_options(controller_args(read_text(helm)));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("hf-token-secret=hf-token model-cache=hostPath /var/lib/nibble-models"),
            std::string::npos)
      << r.output;
  r = check_options({"--backend=kubernetes", "--model-cache-host-path", "relative/dir"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--model-cache-host-path: must be an absolute path"), std::string::npos)
      << r.output;
}

TEST(ControllerArgs, ParserRejectsBadSwitchValuesAndUnknownFlags) {
  auto r = check_options({"--leader-elect=maybe"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--leader-elect: expected true or false"), std::string::npos) << r.output;
  r = check_options({"--leader-election=true"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown option"), std::string::npos) << r.output;
  r = check_options({"--keep-engines-on-exit=false", "--port", "8080"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("port=8080"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace nibble::manifests
