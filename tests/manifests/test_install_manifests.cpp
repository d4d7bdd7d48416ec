// Oracle: the kustomize tree (manifests/) and the Helm chart (charts/nibble) against the official
// Kubernetes and Prometheus Operator schemas (npm kubernetes-models, pinned), with no unknown
// field anywhere; a real helm (v4) lints and renders the chart, and its rendering must hold the
// same objects as `kubectl kustomize manifests`.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

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
    "Role nibble-system/nibble-controller",
    "RoleBinding nibble-system/nibble-controller",
    "Role nibble-system/nibble-controller-leader-election",
    "RoleBinding nibble-system/nibble-controller-leader-election",
    "Role nibble-system/nibble-controller-engine-key-seed",
    "RoleBinding nibble-system/nibble-controller-engine-key-seed",
    "Deployment nibble-system/nibble-controller",
    "Service nibble-system/nibble-controller",
    "NetworkPolicy nibble-system/nibble-engines",
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
  EXPECT_NE(v.output.find("16 valid, 0 invalid"), std::string::npos) << v.output;
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
  expected.insert("Pod nibble-system/nibble-test-router");  // the `helm test` hook
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

TEST(HelmChart, EngineValuesRenderTheGatedModelsOverlay) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  expect_same_install(
      tools, "manifests/overlays/gated-models",
      "--set engine.hfTokenSecret=hf-token --set engine.modelCache.pvc=nibble-models");
}

// Namespaced by default (issue 43): the default install grants the controller nothing outside
// its namespace, and cluster-wide rules are an explicit choice that both installs render alike.
TEST(HelmChart, ClusterWideRulesOnlyAsAnExplicitOption) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  const std::string validation =
      expect_same_install(tools, "manifests/overlays/cluster-wide", "--set rbac.clusterWide=true");
  const std::set<std::string> objects = valid_objects(validation);
  EXPECT_TRUE(objects.count("ClusterRole nibble-controller")) << validation;
  EXPECT_TRUE(objects.count("ClusterRoleBinding nibble-controller")) << validation;
  EXPECT_FALSE(objects.count("Role nibble-system/nibble-controller")) << validation;
}

// The objects of KIND in a rendered install.
std::vector<YAML::Node> objects_of_kind(const std::string& rendered, const std::string& kind) {
  std::vector<YAML::Node> out;
  for (const YAML::Node& doc : YAML::LoadAll(rendered))
    if (doc.IsMap() && doc["kind"].as<std::string>("") == kind) out.push_back(doc);
  return out;
}

// The PodMonitor scrapes the engines of its own namespace only (N installs would scrape each
// engine N times), and the Lease rules name the controller's Lease.
TEST(InstallManifests, PodMonitorAndLeaseRulesStayInTheirNamespace) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  nibble::testing::TempDir dir;
  const std::string kustomized = (dir.path() / "kustomize.yaml").string();
  const std::string helm = (dir.path() / "helm.yaml").string();
  ASSERT_EQ(tools.kustomize("manifests", kustomized).exit_code, 0)
      << read_text(kustomized + ".err");
  ASSERT_EQ(tools.helm_template("", helm).exit_code, 0) << read_text(helm + ".err");
  for (const std::string& file : {kustomized, helm}) {
    const std::string text = read_text(file);
    const auto monitors = objects_of_kind(text, "PodMonitor");
    ASSERT_EQ(monitors.size(), 1u) << file;
    const YAML::Node selector = monitors[0]["spec"]["namespaceSelector"];
    EXPECT_FALSE(selector["any"].IsDefined()) << file;
    ASSERT_EQ(selector["matchNames"].size(), 1u) << file;
    EXPECT_EQ(selector["matchNames"][0].as<std::string>(), "nibble-system") << file;
    for (const YAML::Node& role : objects_of_kind(text, "Role")) {
      for (const YAML::Node& rule : role["rules"]) {
        if (rule["resources"][0].as<std::string>() != "leases") continue;
        const std::string verb = rule["verbs"][0].as<std::string>();
        if (verb == "create") continue;  // cannot be narrowed: the object does not exist yet
        ASSERT_TRUE(rule["resourceNames"].IsDefined()) << file << ": leases " << verb;
        EXPECT_EQ(rule["resourceNames"][0].as<std::string>(), "nibble-controller") << file;
      }
    }
  }
}

// The NOTES a user follows name the release namespace in every kubectl command: the controller
// watches only it, and a recipe applied to `default` would be silently ignored.
TEST(HelmChart, NotesApplyRecipesInTheReleaseNamespace) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  const auto r = nibble::testing::run_command(tools.helm + " install nibble " + source_dir() +
                                              "/charts/nibble -n team-a --dry-run=client 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string notes = r.output.substr(r.output.find("NOTES:"));
  for (const char* expected :
       {"kubectl -n team-a apply -f examples/recipes/qwen3-30b-a3b-nvfp4.yaml",
        "kubectl -n team-a get modelrecipes",
        "kubectl -n team-a port-forward svc/nibble-controller"})
    EXPECT_NE(notes.find(expected), std::string::npos) << expected << "\n" << notes;
  std::istringstream lines(notes);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("kubectl ") != std::string::npos) {
      EXPECT_NE(line.find("kubectl -n team-a "), std::string::npos) << line;
    }
  }
}

// Every repository file docs/kubernetes.md and the chart's NOTES name exists (the docs once sent
// users to examples/recipes/qwen3-30b-a3b.yaml, which never did).
TEST(InstallDocs, NameOnlyFilesThatExist) {
  std::size_t checked = 0;
  for (const char* doc : {"docs/kubernetes.md", "charts/nibble/templates/NOTES.txt"}) {
    const std::string text = read_text(source_dir() + "/" + doc);
    // A top-level folder, not the tail of a longer path (tests/manifests/...).
    const std::regex path(
        R"((^|[^A-Za-z0-9_./-])((examples|manifests|charts|scripts)/[A-Za-z0-9_./-]+\.(yaml|sh|json|md)))");
    for (std::sregex_iterator it(text.begin(), text.end(), path), end; it != end; ++it, ++checked)
      EXPECT_TRUE(std::filesystem::exists(source_dir() + "/" + (*it)[2].str()))
          << doc << " names " << (*it)[2].str();
  }
  EXPECT_GE(checked, 10u);
}

// What users of KubeAI, KServe and the vLLM production-stack chart expect (issue 43): engines
// reachable only from the router and Prometheus, an optional Ingress, a `helm test` hook, and
// engine pod settings the controller passes on.
TEST(HelmChart, NetworkPolicyIngressTestHookAndEnginePodValues) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  nibble::testing::TempDir dir;
  const std::string helm = (dir.path() / "helm.yaml").string();
  ASSERT_EQ(tools
                .helm_template("--set ingress.enabled=true --set ingress.host=llm.example "
                               "--set ingress.tlsSecret=llm-tls --set ingress.className=nginx "
                               "--set engine.runtimeClassName=nvidia "
                               "--set engine.imagePullSecrets={regcred} "
                               "--set engine.requests.memory=100Gi "
                               "--set controller.apiKeySecret=router-key",
                               helm)
                .exit_code,
            0)
      << read_text(helm + ".err");
  const std::string text = read_text(helm);
  const auto policies = objects_of_kind(text, "NetworkPolicy");
  ASSERT_EQ(policies.size(), 1u);
  const YAML::Node spec = policies[0]["spec"];
  EXPECT_EQ(spec["podSelector"]["matchLabels"]["app.kubernetes.io/name"].as<std::string>(),
            "nibble-engine");
  EXPECT_EQ(spec["policyTypes"][0].as<std::string>(), "Ingress");
  ASSERT_EQ(spec["ingress"].size(), 1u);  // one rule: from the router or Prometheus, port http
  const YAML::Node from = spec["ingress"][0]["from"];
  ASSERT_EQ(from.size(), 2u);
  EXPECT_EQ(from[0]["podSelector"]["matchLabels"]["app.kubernetes.io/name"].as<std::string>(),
            "nibble-controller");
  EXPECT_EQ(from[1]["podSelector"]["matchLabels"]["app.kubernetes.io/name"].as<std::string>(),
            "prometheus");
  EXPECT_EQ(spec["ingress"][0]["ports"][0]["port"].as<std::string>(), "http");

  const auto ingresses = objects_of_kind(text, "Ingress");
  ASSERT_EQ(ingresses.size(), 1u);
  EXPECT_EQ(ingresses[0]["spec"]["rules"][0]["host"].as<std::string>(), "llm.example");
  EXPECT_EQ(ingresses[0]["spec"]["tls"][0]["secretName"].as<std::string>(), "llm-tls");
  EXPECT_EQ(ingresses[0]["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"]
                .as<std::string>(),
            "nibble-controller");

  const auto pods = objects_of_kind(text, "Pod");
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_EQ(pods[0]["metadata"]["annotations"]["helm.sh/hook"].as<std::string>(), "test");
  EXPECT_NE(pods[0]["spec"]["containers"][0]["command"][4].as<std::string>().find(
                "http://nibble-controller:8000/health"),
            std::string::npos);

  for (const char* arg : {"- --engine-runtime-class=nvidia", "- --engine-image-pull-secret=regcred",
                          "- --engine-memory-request=100Gi"})
    EXPECT_NE(text.find(arg), std::string::npos) << arg;
  // The router's client key comes from a Secret, never from the values.
  EXPECT_NE(text.find("name: NIBBLE_API_KEY\n              valueFrom:\n                secretKeyRef:\n"
                      "                  name: router-key\n                  key: api-key"),
            std::string::npos)
      << text;
  auto v = tools.script("validate_k8s.mjs", helm);
  EXPECT_EQ(v.exit_code, 0) << v.output;
  // Off by default, and off when asked.
  ASSERT_EQ(tools.helm_template("--set networkPolicy.enabled=false", helm).exit_code, 0);
  EXPECT_TRUE(objects_of_kind(read_text(helm), "NetworkPolicy").empty());
  EXPECT_TRUE(objects_of_kind(read_text(helm), "Ingress").empty());
}

// Values a user sets land where they should, and the result still validates.
TEST(HelmChart, ValuesReachTheObjects) {
  NIBBLE_REQUIRE_K8S_TOOLS(tools);
  nibble::testing::TempDir dir;
  const std::string helm = (dir.path() / "helm.yaml").string();
  ASSERT_EQ(tools
                .helm_template("--set image.repository=registry.local/nc --set image.tag=1.2.3 "
                               "--set engineImage.tag=9.9 --set monitoring.labels.release=kps "
                               "--set controller.replicas=0 --set fullnameOverride=llm",
                               helm)
                .exit_code,
            0)
      << read_text(helm + ".err");
  const std::string text = read_text(helm);
  for (const char* expected :
       {"image: registry.local/nc:1.2.3", "- --engine-image=nibble/nibble-engine:9.9",
        "release: kps", "replicas: 0", "name: llm-controller", "name: llm-dashboard"})
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
           // Only the Lease leader knows the engines' endpoints: a second replica routes nowhere.
           {"--set controller.replicas=2", "/controller/replicas"},
           {"--set engine.modelCache.hostPath=relative", "/engine/modelCache/hostPath"},
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
