// recipe → Kubernetes objects: the fields that matter, asserted one concern per test (not a
// golden file). The engine's flags are compared with what local mode runs.
#include <gtest/gtest.h>

#include <algorithm>

#include "cli/flag_reader.h"
#include "controller/kube/recipe_objects.h"
#include "controller/kube/render_flags.h"
#include "controller/recipe/recipe_parse.h"
#include "controller/reconcile/engine_command.h"

namespace nibble::kube {
namespace {

using json = nlohmann::json;

recipe::ModelRecipe parse(const std::string& spec_tail) {
  const recipe::ParseResult r = recipe::parse_model_recipe(
      "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata:\n  name: qwen3\n"
      "spec:\n  model:\n    source: hf://nvidia/Qwen3-30B-A3B-NVFP4@v2\n    servedName: qwen\n" +
      spec_tail);
  EXPECT_TRUE(r.ok()) << r.error_text();
  return r.recipe;
}

// Options from command-line flags, as `nibble render` and the controller read them.
RenderOptions options_from(std::vector<std::string> args) {
  std::vector<char*> argv = {const_cast<char*>("test")};
  for (std::string& a : args) argv.push_back(a.data());
  cli::FlagReader flags("test", int(argv.size()), argv.data());
  RenderOptions o;
  while (flags.next())
    if (!take_render_flag(flags, o)) flags.unknown();
  return o;
}

const json& pod_spec(const RecipeObjects& o) {
  return o.deployment["spec"]["template"]["spec"];
}
const json& engine(const RecipeObjects& o) {
  return pod_spec(o)["containers"][0];
}

json volume(const RecipeObjects& o, const std::string& name) {
  for (const json& v : pod_spec(o)["volumes"])
    if (v["name"] == name) return v;
  return nullptr;
}

TEST(RecipeObjects, DeploymentLabelsSelectorReplicasAndRollout) {
  const RecipeObjects o = recipe_objects(parse(""), "abc123", 2, {}, {});
  const json& d = o.deployment;
  EXPECT_EQ(d["apiVersion"], "apps/v1");
  EXPECT_EQ(d["kind"], "Deployment");
  EXPECT_EQ(d["metadata"]["name"], "qwen3");
  EXPECT_EQ(d["metadata"]["namespace"], "default");
  EXPECT_EQ(d["spec"]["replicas"], 2);
  const json selector = {{"app.kubernetes.io/name", "nibble-engine"},
                         {"nibble.dev/recipe", "qwen3"}};
  EXPECT_EQ(d["spec"]["selector"]["matchLabels"], selector);
  const json& labels = d["spec"]["template"]["metadata"]["labels"];
  EXPECT_EQ(labels["app.kubernetes.io/name"], "nibble-engine");
  EXPECT_EQ(labels["app.kubernetes.io/instance"], "qwen3");
  EXPECT_EQ(labels["nibble.dev/recipe"], "qwen3");
  EXPECT_EQ(labels["nibble.dev/revision"], "abc123");
  for (const auto& [key, value] : selector.items()) EXPECT_EQ(labels[key], value) << key;
  EXPECT_EQ(d["spec"]["template"]["metadata"]["annotations"]["nibble.dev/spec-hash"], "abc123");
  EXPECT_EQ(d["spec"]["strategy"]["rollingUpdate"], json({{"maxSurge", 1}, {"maxUnavailable", 0}}));

  // A spec change rolls out: the pod template differs; the same inputs give the same objects.
  const RecipeObjects changed = recipe_objects(parse(""), "def456", 2, {}, {});
  EXPECT_NE(changed.deployment["spec"]["template"], d["spec"]["template"]);
  EXPECT_EQ(recipe_objects(parse(""), "abc123", 2, {}, {}).all(), o.all());
}

TEST(RecipeObjects, EngineRunsExactlyTheFlagsLocalModeRuns) {
  const recipe::ModelRecipe r = parse(
      "  engine:\n    maxModelLen: 8192\n    kvCacheDtype: fp8\n    enablePrefixCaching: "
      "false\n    extraArgs: [\"--max-queue-len\", \"64\"]\n");
  RenderOptions options;
  options.extra_engine_args = {"--log-level", "debug"};
  const RecipeObjects o = recipe_objects(r, "h", 1, {}, options);
  std::vector<std::string> expected = reconcile::engine_serve_args(
      r, {"/models/models--nvidia--Qwen3-30B-A3B-NVFP4/v2", "0.0.0.0", 8000});
  expected.push_back("--log-level");
  expected.push_back("debug");
  expected.push_back("--api-key-file");
  expected.push_back("/var/run/nibble/engine-key/api-key");
  EXPECT_EQ(engine(o)["command"], json::array({"nibble-engine"}));
  EXPECT_EQ(engine(o)["args"].get<std::vector<std::string>>(), expected);
  // Spot checks that the shared builder carried the recipe's settings.
  const std::string args = engine(o)["args"].dump();
  for (const char* flag : {"\"--served-model-name\",\"qwen\"", "\"--max-model-len\",\"8192\"",
                           "\"--kv-cache-dtype\",\"fp8\"", "\"--no-enable-prefix-caching\"",
                           "\"--max-queue-len\",\"64\""})
    EXPECT_NE(args.find(flag), std::string::npos) << flag << " in " << args;
  EXPECT_EQ(engine(o)["ports"][0],
            json({{"name", "http"}, {"containerPort", 8000}, {"protocol", "TCP"}}));
}

TEST(RecipeObjects, OneGpuUnlessTheRecipeRunsOnCpu) {
  const RecipeObjects gpu = recipe_objects(parse(""), "h", 1, {}, {});
  EXPECT_EQ(engine(gpu)["resources"]["limits"]["nvidia.com/gpu"], "1");
  EXPECT_EQ(engine(gpu)["resources"]["requests"]["nvidia.com/gpu"], "1");
  const RecipeObjects cpu = recipe_objects(parse("  engine:\n    device: cpu\n"), "h", 1, {}, {});
  EXPECT_FALSE(engine(cpu)["resources"]["requests"].contains("nvidia.com/gpu"));
  EXPECT_FALSE(engine(cpu)["resources"].contains("limits"));
}

// Engine pods are not BestEffort (evicted first, scheduled anywhere): they request CPU, memory
// and ephemeral storage (defaults, or the controller's flags), and carry the runtime class and
// pull secrets a cluster may need; a PodDisruptionBudget lets drains evict one at a time.
TEST(RecipeObjects, RequestsRuntimeClassPullSecretsAndDisruptionBudget) {
  const RecipeObjects defaults = recipe_objects(parse(""), "h", 1, {"uid-1"}, {});
  const json& requests = engine(defaults)["resources"]["requests"];
  EXPECT_EQ(requests["cpu"], "2");
  EXPECT_EQ(requests["memory"], "16Gi");
  EXPECT_EQ(requests["ephemeral-storage"], "1Gi");
  EXPECT_FALSE(engine(defaults)["resources"]["limits"].contains("memory"));
  EXPECT_FALSE(pod_spec(defaults).contains("runtimeClassName"));
  EXPECT_FALSE(pod_spec(defaults).contains("imagePullSecrets"));
  const json& pdb = defaults.disruption_budget;
  EXPECT_EQ(pdb["apiVersion"], "policy/v1");
  EXPECT_EQ(pdb["kind"], "PodDisruptionBudget");
  EXPECT_EQ(pdb["spec"]["maxUnavailable"], 1);
  EXPECT_EQ(pdb["spec"]["selector"]["matchLabels"],
            defaults.deployment["spec"]["selector"]["matchLabels"]);
  EXPECT_EQ(pdb["metadata"]["ownerReferences"][0]["uid"], "uid-1");
  ASSERT_EQ(defaults.all().size(), 3u);
  EXPECT_EQ(defaults.all()[2]["kind"], "PodDisruptionBudget");

  const RenderOptions o = options_from(
      {"--engine-cpu-request", "8", "--engine-memory-request=100Gi",
       "--engine-ephemeral-storage-request", "20Gi", "--engine-runtime-class", "nvidia",
       "--engine-image-pull-secret", "regcred", "--engine-image-pull-secret=mirror"});
  const RecipeObjects set = recipe_objects(parse(""), "h", 1, {}, o);
  EXPECT_EQ(engine(set)["resources"]["requests"], json({{"cpu", "8"},
                                                        {"memory", "100Gi"},
                                                        {"ephemeral-storage", "20Gi"},
                                                        {"nvidia.com/gpu", "1"}}));
  EXPECT_EQ(pod_spec(set)["runtimeClassName"], "nvidia");
  EXPECT_EQ(pod_spec(set)["imagePullSecrets"],
            json::parse(R"([{"name": "regcred"}, {"name": "mirror"}])"));
  EXPECT_THROW(options_from({"--engine-runtime-class", "Not_A_Label"}), std::invalid_argument);
}

// A recipe's own requests (spec.resources) win over the controller's defaults, field by field.
TEST(RecipeObjects, TheRecipesRequestsWinOverTheControllersDefaults) {
  const RenderOptions o = options_from({"--engine-cpu-request", "8"});
  const RecipeObjects set =
      recipe_objects(parse("  resources: {cpu: 500m, memory: 64Gi}\n"), "h", 1, {}, o);
  EXPECT_EQ(engine(set)["resources"]["requests"], json({{"cpu", "500m"},
                                                        {"memory", "64Gi"},
                                                        {"ephemeral-storage", "1Gi"},
                                                        {"nvidia.com/gpu", "1"}}));
}

// Tolerations the API server would refuse are refused here, naming the field (the CRD's enums).
TEST(RecipeObjects, TolerationOperatorsAndEffectsOutsideTheApisEnumsAreRefused) {
  EXPECT_THROW(recipe_objects(parse("  placement:\n    tolerations: [{key: gpu, operator: "
                                    "Sometimes}]\n"),
                              "h", 1, {}, {}),
               RenderError);
  EXPECT_THROW(recipe_objects(parse("  placement:\n    tolerations: [{key: gpu, operator: "
                                    "Exists, effect: NoRun}]\n"),
                              "h", 1, {}, {}),
               RenderError);
  EXPECT_NO_THROW(recipe_objects(parse("  placement:\n    tolerations: [{key: gpu, operator: "
                                       "Equal, value: a, effect: NoExecute}]\n"),
                                 "h", 1, {}, {}));
}

TEST(RecipeObjects, PlacementSoloOnlyNodeSelectorAndTolerations) {
  const RecipeObjects plain = recipe_objects(parse(""), "h", 1, {}, {});
  EXPECT_FALSE(pod_spec(plain).contains("affinity"));
  EXPECT_FALSE(pod_spec(plain).contains("nodeSelector"));
  EXPECT_FALSE(pod_spec(plain).contains("tolerations"));

  const RecipeObjects o = recipe_objects(
      parse("  placement:\n    soloOnly: true\n    nodeSelector: {nvidia.com/gpu.product: GB10}\n"
            "    tolerations:\n    - {key: nvidia.com/gpu, operator: Exists, effect: NoExecute, "
            "tolerationSeconds: 300}\n"),
      "h", 1, {}, {});
  EXPECT_EQ(pod_spec(o)["nodeSelector"], json({{"nvidia.com/gpu.product", "GB10"}}));
  const json& tol = pod_spec(o)["tolerations"][0];
  EXPECT_EQ(tol["key"], "nvidia.com/gpu");
  EXPECT_EQ(tol["operator"], "Exists");
  EXPECT_EQ(tol["effect"], "NoExecute");
  EXPECT_EQ(tol["tolerationSeconds"], 300);  // an integer, as the API wants
  const json& terms =
      pod_spec(o)["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
  ASSERT_EQ(terms.size(), 1u);
  EXPECT_EQ(terms[0]["topologyKey"], "kubernetes.io/hostname");
  EXPECT_EQ(terms[0]["labelSelector"]["matchLabels"],
            json({{"app.kubernetes.io/name", "nibble-engine"}}));  // every engine, any recipe
  EXPECT_EQ(terms[0]["namespaceSelector"], json::object());        // in every namespace
}

TEST(RecipeObjects, HubModelsAreDownloadedIntoTheCacheVolume) {
  const RecipeObjects o = recipe_objects(parse(""), "h", 1, {}, {});
  EXPECT_EQ(volume(o, "models"), json({{"name", "models"}, {"emptyDir", json::object()}}));
  const json& init = pod_spec(o)["initContainers"][0];
  EXPECT_EQ(init["command"],
            json::array({"nibble", "pull", "hf://nvidia/Qwen3-30B-A3B-NVFP4@v2", "/models"}));
  // Why a download failed (a gated model without a token) stays on the pod for the status.
  EXPECT_EQ(init["terminationMessagePolicy"], "FallbackToLogsOnError");
  EXPECT_FALSE(init.contains("env"));
  bool read_only_mount = false;
  for (const json& m : engine(o)["volumeMounts"])
    read_only_mount |=
        m["name"] == "models" && m["mountPath"] == "/models" && m["readOnly"] == true;
  EXPECT_TRUE(read_only_mount) << engine(o)["volumeMounts"].dump();

  const RenderOptions pvc =
      options_from({"--model-cache-pvc", "model-cache", "--hf-token-secret=hf"});
  const RecipeObjects on_pvc = recipe_objects(parse(""), "h", 1, {}, pvc);
  EXPECT_EQ(volume(on_pvc, "models")["persistentVolumeClaim"]["claimName"], "model-cache");
  const json& env = pod_spec(on_pvc)["initContainers"][0]["env"][0];
  EXPECT_EQ(env["name"], "HF_TOKEN");
  EXPECT_EQ(env["valueFrom"]["secretKeyRef"]["name"], "hf");

  RenderOptions host;
  host.model_cache = {ModelCache::Kind::kHostPath, "", "/var/lib/nibble/models", ""};
  EXPECT_EQ(volume(recipe_objects(parse(""), "h", 1, {}, host), "models")["hostPath"]["path"],
            "/var/lib/nibble/models");
}

TEST(RecipeObjects, FileModelsAreMountedFromTheNodeAndRelativePathsRejected) {
  recipe::ModelRecipe r = parse("");
  std::vector<recipe::FieldError> errors;
  r.source = recipe::parse_model_source("/srv/models/qwen3", errors);
  ASSERT_TRUE(errors.empty());
  const RecipeObjects o = recipe_objects(r, "h", 1, {}, {});
  EXPECT_FALSE(pod_spec(o).contains("initContainers"));
  EXPECT_EQ(volume(o, "models")["hostPath"],
            json({{"path", "/srv/models/qwen3"}, {"type", "Directory"}}));
  EXPECT_EQ(engine(o)["args"][2], "/srv/models/qwen3");

  r.source = recipe::parse_model_source("models/qwen3", errors);
  EXPECT_THROW(recipe_objects(r, "h", 1, {}, {}), RenderError);
}

// speculativeConfig's draft_model: the draft is placed as the model is (a Hub draft fetched
// into the same cache by its own init container, with the same token; a file draft mounted
// read-only from the node), and the engine's --speculative-config names where it was placed.
recipe::ModelRecipe with_draft(const std::string& model_source, const std::string& draft) {
  recipe::ModelRecipe r =
      parse("  engine:\n    speculativeConfig: '{\"method\": \"draft_model\", \"model\": \"" +
            draft + "\", \"num_speculative_tokens\": 4}'\n");
  std::vector<recipe::FieldError> errors;
  r.source = recipe::parse_model_source(model_source, errors);
  EXPECT_TRUE(errors.empty());
  return r;
}

json speculative_config(const RecipeObjects& o) {
  const auto args = engine(o)["args"].get<std::vector<std::string>>();
  const auto flag = std::find(args.begin(), args.end(), "--speculative-config");
  if (flag == args.end() || flag + 1 == args.end()) return nullptr;
  return json::parse(*(flag + 1));
}

TEST(RecipeObjects, AHubDraftModelIsDownloadedBesideTheModel) {
  const RenderOptions o = options_from({"--hf-token-secret=hf"});
  const recipe::ModelRecipe r =
      with_draft("hf://nvidia/Qwen3-30B-A3B-NVFP4@v2", "hf://Qwen/Qwen3-0.6B");
  const RecipeObjects objects = recipe_objects(r, "h", 1, {}, o);
  const json& init = pod_spec(objects)["initContainers"];
  ASSERT_EQ(init.size(), 2u) << init.dump();
  EXPECT_EQ(init[0]["name"], "model-download");
  EXPECT_EQ(init[1]["name"], "model-download-draft");
  EXPECT_EQ(init[1]["command"], json::array({"nibble", "pull", "hf://Qwen/Qwen3-0.6B", "/models"}));
  EXPECT_EQ(init[1]["volumeMounts"], init[0]["volumeMounts"]);  // the same cache
  EXPECT_EQ(init[1]["env"], init[0]["env"]);                    // gated drafts: the same token
  EXPECT_EQ(init[1]["env"][0]["valueFrom"]["secretKeyRef"]["name"], "hf");
  EXPECT_EQ(pod_spec(objects)["volumes"].size(), 3u);  // tmp, engine-key, models: one cache
  EXPECT_EQ(speculative_config(objects), json({{"method", "draft_model"},
                                               {"model", "/models/models--Qwen--Qwen3-0.6B/main"},
                                               {"num_speculative_tokens", 4}}));
  // What local mode runs, with the draft where local mode placed it.
  const std::vector<std::string> local =
      reconcile::engine_serve_args(r, {"/models/models--nvidia--Qwen3-30B-A3B-NVFP4/v2", "0.0.0.0",
                                       8000, "/models/models--Qwen--Qwen3-0.6B/main"});
  const auto args = engine(objects)["args"].get<std::vector<std::string>>();
  EXPECT_EQ(std::vector<std::string>(args.begin(), args.begin() + long(local.size())), local);

  // A model from the node with a draft from the Hub: the cache comes in for the draft alone.
  const RecipeObjects mixed =
      recipe_objects(with_draft("/srv/models/qwen3", "hf://Qwen/Qwen3-0.6B"), "h", 1, {}, o);
  EXPECT_EQ(volume(mixed, "models")["hostPath"]["path"], "/srv/models/qwen3");
  EXPECT_EQ(volume(mixed, "model-cache"),
            json({{"name", "model-cache"}, {"emptyDir", json::object()}}));
  ASSERT_EQ(pod_spec(mixed)["initContainers"].size(), 1u);
  EXPECT_EQ(pod_spec(mixed)["initContainers"][0]["name"], "model-download-draft");
  EXPECT_EQ(pod_spec(mixed)["initContainers"][0]["volumeMounts"][0]["name"], "model-cache");
  EXPECT_EQ(speculative_config(mixed)["model"], "/models/models--Qwen--Qwen3-0.6B/main");
}

TEST(RecipeObjects, AFileDraftModelIsMountedFromTheNode) {
  const RecipeObjects o =
      recipe_objects(with_draft("/srv/models/qwen3", "/srv/models/qwen3-0.6b"), "h", 1, {}, {});
  EXPECT_FALSE(pod_spec(o).contains("initContainers"));
  EXPECT_EQ(volume(o, "draft-model")["hostPath"],
            json({{"path", "/srv/models/qwen3-0.6b"}, {"type", "Directory"}}));
  bool read_only = false;
  for (const json& m : engine(o)["volumeMounts"])
    read_only |= m["name"] == "draft-model" && m["mountPath"] == "/srv/models/qwen3-0.6b" &&
                 m["readOnly"] == true;
  EXPECT_TRUE(read_only) << engine(o)["volumeMounts"].dump();
  EXPECT_EQ(speculative_config(o)["model"], "/srv/models/qwen3-0.6b");

  // The model as its own draft: one mount.
  const RecipeObjects same =
      recipe_objects(with_draft("/srv/models/qwen3", "/srv/models/qwen3"), "h", 1, {}, {});
  EXPECT_TRUE(volume(same, "draft-model").is_null());
  EXPECT_EQ(speculative_config(same)["model"], "/srv/models/qwen3");

  // Where the pod mounts something else already: the API server would refuse the Deployment.
  for (const char* taken : {"/models", "/tmp"}) {
    try {
      recipe_objects(with_draft("hf://org/name", taken), "h", 1, {}, {});
      ADD_FAILURE() << taken << " was mounted twice";
    } catch (const RenderError& e) {
      EXPECT_NE(std::string(e.what()).find("spec.engine.speculativeConfig"), std::string::npos)
          << e.what();
    }
  }
}

TEST(RecipeObjects, ProbesGracePeriodAndNonRootSecurity) {
  RenderOptions options;
  options.startup_timeout_seconds = 1205;
  options.drain_seconds = 90;
  const RecipeObjects o = recipe_objects(parse(""), "h", 1, {}, options);
  for (const char* probe : {"startupProbe", "readinessProbe", "livenessProbe"}) {
    EXPECT_EQ(engine(o)[probe]["httpGet"], json({{"path", "/health"}, {"port", "http"}})) << probe;
  }
  const json& startup = engine(o)["startupProbe"];
  EXPECT_GE(startup["periodSeconds"].get<int>() * startup["failureThreshold"].get<int>(), 1205);
  // The engine drains for 90 s after a 2 s preStop sleep that lets the router drop the pod.
  EXPECT_EQ(engine(o)["lifecycle"]["preStop"], json({{"sleep", {{"seconds", 2}}}}));
  EXPECT_EQ(pod_spec(o)["terminationGracePeriodSeconds"], 92);
  // A crashing engine's log tail stays on the pod, for the status and the router's 503.
  EXPECT_EQ(engine(o)["terminationMessagePolicy"], "FallbackToLogsOnError");
  EXPECT_EQ(pod_spec(o)["securityContext"]["runAsNonRoot"], true);
  EXPECT_EQ(pod_spec(o)["securityContext"]["runAsUser"], 65532);
  EXPECT_EQ(pod_spec(o)["automountServiceAccountToken"], false);
  EXPECT_EQ(engine(o)["securityContext"]["allowPrivilegeEscalation"], false);
  EXPECT_EQ(engine(o)["securityContext"]["capabilities"]["drop"], json::array({"ALL"}));
}

TEST(RecipeObjects, OwnedByTheRecipeSoDeletingItCollectsThem) {
  RenderOptions with_monitor;
  with_monitor.pod_monitor = true;
  const RecipeObjects owned = recipe_objects(parse(""), "h", 1, {"5f1c-uid"}, with_monitor);
  const std::vector<json> all = owned.all();
  ASSERT_EQ(all.size(), 4u);  // Deployment, Service, PodDisruptionBudget, PodMonitor
  for (const json& obj : all) {
    const json& ref = obj["metadata"]["ownerReferences"][0];
    EXPECT_EQ(ref["apiVersion"], "nibble.dev/v1alpha1") << obj["kind"];
    EXPECT_EQ(ref["kind"], "ModelRecipe");
    EXPECT_EQ(ref["name"], "qwen3");
    EXPECT_EQ(ref["uid"], "5f1c-uid");
    EXPECT_EQ(ref["controller"], true);
  }
  const RecipeObjects unowned = recipe_objects(parse(""), "h", 1, {}, {});
  EXPECT_FALSE(unowned.deployment["metadata"].contains("ownerReferences"));
  EXPECT_TRUE(unowned.pod_monitor.is_null());
  EXPECT_EQ(unowned.all().size(), 3u);
}

// The engine's API needs the recipe's key, read from its Secret: mounted read-only, readable by
// the pod's group only, only in the engine container; the Secret is owned by the recipe and
// immutable, and never among the objects `nibble render` prints.
TEST(RecipeObjects, EngineServesOnlyWithTheRecipesKeyFromItsSecret) {
  const RecipeObjects o = recipe_objects(parse(""), "h", 1, {"5f1c-uid"}, {});
  const json key_volume = volume(o, "engine-key");
  ASSERT_FALSE(key_volume.is_null());
  EXPECT_EQ(key_volume["secret"]["secretName"], "qwen3-engine-key");
  EXPECT_EQ(key_volume["secret"]["defaultMode"], 0440);
  EXPECT_EQ(key_volume["secret"]["items"],
            json::array({{{"key", "api-key"}, {"path", "api-key"}}}));
  bool mounted = false;
  for (const json& m : engine(o)["volumeMounts"]) {
    if (m["name"] != "engine-key") continue;
    mounted = true;
    EXPECT_EQ(m["mountPath"], "/var/run/nibble/engine-key");
    EXPECT_EQ(m["readOnly"], true);
  }
  EXPECT_TRUE(mounted);
  for (const json& m : pod_spec(o)["initContainers"][0]["volumeMounts"])
    EXPECT_NE(m["name"], "engine-key");  // the download needs no key
  const std::vector<std::string> args = engine(o)["args"].get<std::vector<std::string>>();
  ASSERT_GE(args.size(), 2u);
  EXPECT_EQ(args[args.size() - 2], "--api-key-file");
  EXPECT_EQ(args.back(), "/var/run/nibble/engine-key/api-key");
  for (const json& obj : o.all()) EXPECT_NE(obj["kind"], "Secret");

  const json secret = engine_key_secret(parse(""), "k3y", {"5f1c-uid"}, {});
  EXPECT_EQ(secret["kind"], "Secret");
  EXPECT_EQ(secret["metadata"]["name"], "qwen3-engine-key");
  EXPECT_EQ(secret["metadata"]["namespace"], "default");
  EXPECT_EQ(secret["metadata"]["ownerReferences"][0]["uid"], "5f1c-uid");
  EXPECT_EQ(secret["immutable"], true);
  EXPECT_EQ(secret["stringData"], json({{"api-key", "k3y"}}));
}

TEST(RecipeObjects, ServiceAndPodMonitorSelectTheEnginePods) {
  RenderOptions options;
  options.namespace_name = "ml";
  options.pod_monitor = true;
  const RecipeObjects o = recipe_objects(parse(""), "h", 1, {}, options);
  EXPECT_EQ(o.service["metadata"]["namespace"], "ml");
  EXPECT_EQ(o.service["spec"]["selector"], o.deployment["spec"]["selector"]["matchLabels"]);
  EXPECT_EQ(o.service["spec"]["ports"][0]["targetPort"], "http");
  EXPECT_EQ(o.pod_monitor["kind"], "PodMonitor");
  EXPECT_EQ(o.pod_monitor["spec"]["selector"]["matchLabels"],
            o.deployment["spec"]["selector"]["matchLabels"]);
  EXPECT_EQ(o.pod_monitor["spec"]["podMetricsEndpoints"][0]["path"], "/metrics");
  EXPECT_EQ(service_name("7b-chat"), "r-7b-chat");  // a Service name must start with a letter
  EXPECT_EQ(service_name("qwen3"), "qwen3");
}

TEST(RecipeObjects, RenderFlagsSetOptionsAndRejectBadValues) {
  const RenderOptions o = options_from(
      {"--namespace", "ml", "--engine-image=registry.example/engine:1", "--engine-drain-seconds",
       "300", "--model-cache-host-path", "/var/lib/nibble", "--pod-monitor"});
  EXPECT_EQ(o.namespace_name, "ml");
  EXPECT_EQ(o.image, "registry.example/engine:1");
  EXPECT_EQ(o.drain_seconds, 300);
  EXPECT_EQ(o.model_cache.kind, ModelCache::Kind::kHostPath);
  EXPECT_EQ(o.model_cache.host_path, "/var/lib/nibble");
  EXPECT_TRUE(o.pod_monitor);
  for (const std::vector<std::string>& bad :
       std::vector<std::vector<std::string>>{{"--namespace", "Not_A_Label"},
                                             {"--engine-startup-timeout", "0"},
                                             {"--engine-drain-seconds", "ten"},
                                             {"--model-cache-host-path", "models"},
                                             {"--image-pull-policy", "Sometimes"},
                                             {"--engine-image"},
                                             {"--engine-image="},
                                             {"--replicaz", "2"}})
    EXPECT_THROW(options_from(bad), std::invalid_argument) << bad[0];
}

}  // namespace
}  // namespace nibble::kube
