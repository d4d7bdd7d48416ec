// Oracle: the kustomize tree (manifests/) and the Helm chart (charts/nibble) against the official
// Kubernetes and Prometheus Operator schemas (npm kubernetes-models, pinned), with no unknown
// field anywhere; a real helm (v4) lints and renders the chart, and its rendering must hold the
// same objects as `kubectl kustomize manifests`.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "tests/manifests/manifest_tools.h"
#include "tests/support/temp_dir.h"

namespace nibble::manifests {
namespace {

using testing::read_text;
using testing::source_dir;

// The "ok KIND NAMESPACE/NAME" lines of validate_k8s.mjs.
std::set<std::string> valid_objects(const std::string& output) {
  std::set<std::string> out;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("ok ")) out.insert(line.substr(3));
  return out;
}

const std::set<std::string> kFullInstall = {
    "Namespace nibble-system",
    "CustomResourceDefinition modelrecipes.nibble.dev",
    "ServiceAccount nibble-system/nibble-controller",
    "ClusterRole nibble-controller",
    "ClusterRoleBinding nibble-controller",
    "Role nibble-system/nibble-controller-leader-election",
    "RoleBinding nibble-system/nibble-controller-leader-election",
    "Role nibble-system/nibble-controller-engine-key-seed",
    "RoleBinding nibble-system/nibble-controller-engine-key-seed",
    "Deployment nibble-system/nibble-controller",
    "Service nibble-system/nibble-controller",
    "ServiceMonitor nibble-system/nibble-controller",
    "PodMonitor nibble-system/nibble-engines",
    "PrometheusRule nibble-system/nibble",
    "ConfigMap nibble-system/nibble-dashboard",
};
const std::set<std::string> kMonitoringObjects = {
    "ServiceMonitor nibble-system/nibble-controller", "PodMonitor nibble-system/nibble-engines",
    "PrometheusRule nibble-system/nibble", "ConfigMap nibble-system/nibble-dashboard"};

TEST(InstallManifests, KustomizeInstallValidatesObjectForObject) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  nibble::testing::TempDir dir;
  const std::string out = (dir.path() / "install.yaml").string();
  auto k = tools.kustomize("manifests", out);
  ASSERT_EQ(k.exit_code, 0) << read_text(out + ".err");
  auto v = tools.script("validate_k8s.mjs", out);
  EXPECT_EQ(v.exit_code, 0) << v.output;
  EXPECT_EQ(valid_objects(v.output), kFullInstall) << v.output;
  EXPECT_NE(v.output.find("15 valid, 0 invalid"), std::string::npos) << v.output;
}

TEST(InstallManifests, NoMonitoringOverlayLeavesOutEveryMonitoringObject) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  nibble::testing::TempDir dir;
  const std::string out = (dir.path() / "install.yaml").string();
  ASSERT_EQ(tools.kustomize("manifests/overlays/no-monitoring", out).exit_code, 0)
      << read_text(out + ".err");
  auto v = tools.script("validate_k8s.mjs", out);
  EXPECT_EQ(v.exit_code, 0) << v.output;
  std::set<std::string> expected;
  std::ranges::set_difference(kFullInstall, kMonitoringObjects,
                              std::inserter(expected, expected.end()));
  EXPECT_EQ(valid_objects(v.output), expected) << v.output;
}

// Every file under manifests/ on its own (what `kubectl apply -f` of one file would send).
TEST(InstallManifests, EveryManifestFileValidates) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  std::string files;
  int count = 0;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(source_dir() + "/manifests")) {
    const auto& p = entry.path();
    if (p.extension() != ".yaml" || p.filename() == "kustomization.yaml") continue;
    files += " " + p.string();
    ++count;
  }
  ASSERT_GE(count, 12);
  auto v = tools.script("validate_k8s.mjs", files);
  EXPECT_EQ(v.exit_code, 0) << v.output;
  EXPECT_NE(v.output.find(" 0 invalid"), std::string::npos) << v.output;
}

// The validator itself: unknown fields, wrong types and unknown kinds must fail it.
TEST(InstallManifests, ValidatorRejectsUnknownFieldsWrongTypesAndUnknownKinds) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  nibble::testing::TempDir dir;
  const auto file = dir.path() / "bad.yaml";
  std::ofstream(file) << R"(apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ns}
spec:
  replicas: "2"
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: nginx
          ports: [{containerPort: 80, protocl: TCP}]
---
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata: {name: pm, labelz: {a: b}}
spec:
  selector: {}
  podMetricsEndpoints: [{port: http, intervall: 5s}]
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Thing, plural: things}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-validations: [{rule: "true", reasons: FieldValueInvalid}]
---
apiVersion: v1
kind: Frobnicator
metadata: {name: f}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: fine}
data: {a: b}
)";
  auto v = tools.script("validate_k8s.mjs", file.string());
  EXPECT_EQ(v.exit_code, 1) << v.output;
  for (const char* expected : {
           "error Deployment ns/web: /spec/replicas: must be integer",
           "error Deployment ns/web: /spec/template/spec/containers/0/ports/0/protocl: unknown "
           "field",
           "error PodMonitor pm: /metadata/labelz: unknown field",
           "error PodMonitor pm: /spec/podMetricsEndpoints/0/intervall: unknown field",
           "error CustomResourceDefinition things.example.com: "
           "/spec/versions/0/schema/openAPIV3Schema/x-kubernetes-validations/0/reasons: unknown "
           "field",
           "error Frobnicator f: no schema for v1 Frobnicator",
           "ok ConfigMap fine",
           "1 valid, 4 invalid",
       })
    EXPECT_NE(v.output.find(expected), std::string::npos) << expected << "\n" << v.output;
}

TEST(HelmChart, LintsStrictly) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  auto r = nibble::testing::run_command(tools.helm + " lint --strict " + source_dir() +
                                        "/charts/nibble 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 chart(s) linted, 0 chart(s) failed"), std::string::npos) << r.output;
}

// Renders kustomize DIR and the chart with HELM_ARGS, checks the two hold the same objects, and
// returns the helm rendering's validation output.
std::string expect_same_install(const testing::K8sTools& tools, const std::string& kustomize_dir,
                                const std::string& helm_args) {
  nibble::testing::TempDir dir;
  const std::string kustomized = (dir.path() / "kustomize.yaml").string();
  const std::string helm = (dir.path() / "helm.yaml").string();
  EXPECT_EQ(tools.kustomize(kustomize_dir, kustomized).exit_code, 0)
      << read_text(kustomized + ".err");
  EXPECT_EQ(tools.helm_template(helm_args, helm).exit_code, 0) << read_text(helm + ".err");
  auto c = tools.script("compare_installs.mjs", kustomized + " " + helm);
  EXPECT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("installs match"), std::string::npos) << c.output;
  auto v = tools.script("validate_k8s.mjs", helm);
  EXPECT_EQ(v.exit_code, 0) << v.output;
  return v.output;
}

TEST(HelmChart, RendersTheKustomizeInstallObjectForObject) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  const std::string validation = expect_same_install(tools, "manifests", "");
  std::set<std::string> expected = kFullInstall;
  expected.erase("Namespace nibble-system");  // helm install --create-namespace makes it
  EXPECT_EQ(valid_objects(validation), expected) << validation;
}

TEST(HelmChart, MonitoringOffRendersTheNoMonitoringOverlay) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  const std::string validation =
      expect_same_install(tools, "manifests/overlays/no-monitoring",
                          "--set monitoring.enabled=false --set dashboard.enabled=false");
  for (const auto& monitoring : kMonitoringObjects)
    EXPECT_FALSE(valid_objects(validation).count(monitoring)) << monitoring;
}

// Values a user sets land where they should, and the result still validates.
TEST(HelmChart, ValuesReachTheObjects) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  nibble::testing::TempDir dir;
  const std::string helm = (dir.path() / "helm.yaml").string();
  ASSERT_EQ(tools
                .helm_template("--set image.repository=registry.local/nc --set image.tag=1.2.3 "
                               "--set engineImage.tag=9.9 --set monitoring.labels.release=kps "
                               "--set controller.replicas=2 --set fullnameOverride=llm",
                               helm)
                .exit_code,
            0)
      << read_text(helm + ".err");
  const std::string text = read_text(helm);
  for (const char* expected :
       {"image: registry.local/nc:1.2.3", "- --engine-image=nibble/nibble-engine:9.9",
        "release: kps", "replicas: 2", "name: llm-controller", "name: llm-dashboard"})
    EXPECT_NE(text.find(expected), std::string::npos) << expected;
  auto v = tools.script("validate_k8s.mjs", helm);
  EXPECT_EQ(v.exit_code, 0) << v.output;
}

TEST(HelmChart, ValuesSchemaRejectsBadValues) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  nibble::testing::TempDir dir;
  const std::string helm = (dir.path() / "helm.yaml").string();
  for (const auto& [set, expected] : std::vector<std::pair<std::string, std::string>>{
           {"--set controller.replicas=-1", "/controller/replicas"},
           {"--set service.type=Ingress", "/service/type"},
           {"--set monitoring.interval=often", "/monitoring/interval"},
           {"--set image.pullPolicy=Sometimes", "/image/pullPolicy"},
           {"--set controler.replicas=2", "additional properties 'controler' not allowed"},
       }) {
    EXPECT_NE(tools.helm_template(set, helm).exit_code, 0) << set;
    const std::string err = read_text(helm + ".err");
    EXPECT_NE(err.find(expected), std::string::npos) << set << "\n" << err;
  }
}

}  // namespace
}  // namespace nibble::manifests
