#include "controller/kube/recipe_objects.h"

#include "controller/recipe/speculative_recipe.h"
#include "controller/reconcile/engine_command.h"
#include "controller/source/model_downloader.h"

namespace nibble::kube {
namespace {

using json = nlohmann::json;

json labels(const recipe::ModelRecipe& r, const std::string& revision) {
  json l = selector_labels(r.name);
  l["app.kubernetes.io/instance"] = r.name;
  l["app.kubernetes.io/component"] = "engine";
  l["app.kubernetes.io/managed-by"] = "nibble-controller";
  if (!revision.empty()) l[kRevisionLabel] = revision;
  return l;
}

json metadata(const std::string& name, const recipe::ModelRecipe& r, const Owner& owner,
              const RenderOptions& o) {
  json m = {{"name", name}, {"namespace", o.namespace_name}, {"labels", labels(r, "")}};
  if (!owner.uid.empty()) {
    m["ownerReferences"] = json::array({{{"apiVersion", recipe::kApiVersion},
                                         {"kind", recipe::kKind},
                                         {"name", r.name},
                                         {"uid", owner.uid},
                                         {"controller", true},
                                         {"blockOwnerDeletion", true}}});
  }
  return m;
}

json health_probe(int period, int timeout, int failures) {
  return {{"httpGet", {{"path", "/health"}, {"port", "http"}}},
          {"periodSeconds", period},
          {"timeoutSeconds", timeout},
          {"failureThreshold", failures}};
}

json container_security() {
  return {{"allowPrivilegeEscalation", false},
          {"readOnlyRootFilesystem", true},
          {"capabilities", {{"drop", json::array({"ALL"})}}}};
}

json cache_volume(const ModelCache& cache) {
  switch (cache.kind) {
    case ModelCache::Kind::kPersistentVolumeClaim:
      return {{"name", "models"}, {"persistentVolumeClaim", {{"claimName", cache.claim_name}}}};
    case ModelCache::Kind::kHostPath:
      return {{"name", "models"},
              {"hostPath", {{"path", cache.host_path}, {"type", "DirectoryOrCreate"}}}};
    case ModelCache::Kind::kEmptyDir:
      break;
  }
  json empty = json::object();
  if (!cache.size_limit.empty()) empty["sizeLimit"] = cache.size_limit;
  return {{"name", "models"}, {"emptyDir", empty}};
}

// A deleted engine pod keeps accepting this long before its SIGTERM (a preStop sleep, counted
// into the grace period): the router drops it when the watch shows the deletion, so a request
// it picked just before still finds the engine accepting (local mode waits as long).
constexpr int kDeregistrationSeconds = 2;

// A container that fails leaves the tail of its log as its termination message, which the
// controller reads off the pod (no log API call) to say why a replica crash-loops.
constexpr const char* kLogsOnError = "FallbackToLogsOnError";

// An init container that fetches an hf:// model into the cache volume (resuming a partial
// download, skipping a complete one), so the engine starts on local files. `name`: the model's
// is model-download, a draft model's model-download-draft (pod_replicas.h reads both); `cache`:
// the cache volume's name.
json download_container(const std::string& name, const recipe::ModelSource& source,
                        const std::string& cache, const RenderOptions& o) {
  json env = json::array();
  if (!o.hf_token_secret.empty()) {
    env.push_back({{"name", "HF_TOKEN"},
                   {"valueFrom",
                    {{"secretKeyRef",
                      {{"name", o.hf_token_secret}, {"key", "HF_TOKEN"}, {"optional", true}}}}}});
  }
  if (!o.hf_endpoint.empty()) env.push_back({{"name", "HF_ENDPOINT"}, {"value", o.hf_endpoint}});
  json c = {{"name", name},
            {"image", o.image},
            {"imagePullPolicy", o.image_pull_policy},
            {"command", json::array({"nibble", "pull", source.original, kModelMountPath})},
            {"terminationMessagePolicy", kLogsOnError},
            {"securityContext", container_security()},
            {"volumeMounts", json::array({{{"name", cache}, {"mountPath", kModelMountPath}},
                                          {{"name", "tmp"}, {"mountPath", "/tmp"}}})}};
  if (!env.empty()) c["env"] = env;
  return c;
}

json engine_container(const recipe::ModelRecipe& r, const RenderOptions& o, json mounts) {
  const std::string draft_dir = r.engine.draft_model ? model_dir_in_pod(*r.engine.draft_model) : "";
  std::vector<std::string> args = reconcile::engine_serve_args(
      r, {model_dir_in_pod(r.source), "0.0.0.0", kEnginePort, draft_dir});
  args.insert(args.end(), o.extra_engine_args.begin(), o.extra_engine_args.end());
  args.insert(args.end(),
              {"--api-key-file", std::string(kEngineKeyMountPath) + "/" + kEngineKeyField});
  json c = {
      {"name", "engine"},
      {"image", o.image},
      {"imagePullPolicy", o.image_pull_policy},
      {"command", json::array({"nibble-engine"})},
      {"args", args},
      {"ports",
       json::array({{{"name", "http"}, {"containerPort", kEnginePort}, {"protocol", "TCP"}}})},
      // /health answers 503 until the model is loaded: the startup probe waits that long, the
      // liveness probe takes over only after it.
      {"startupProbe", health_probe(10, 2, (o.startup_timeout_seconds + 9) / 10)},
      {"readinessProbe", health_probe(5, 2, 2)},
      {"livenessProbe", health_probe(10, 5, 6)},
      {"terminationMessagePolicy", kLogsOnError},
      // SIGTERM only after the router has seen the pod deleted and stopped picking it.
      {"lifecycle", {{"preStop", {{"sleep", {{"seconds", kDeregistrationSeconds}}}}}}},
      {"securityContext", container_security()},
      {"volumeMounts", std::move(mounts)}};
  // The recipe's own requests win over the controller's defaults.
  auto pick = [](const std::string& mine, const std::string& fallback) {
    return mine.empty() ? fallback : mine;
  };
  json requests = {
      {"cpu", pick(r.resources.cpu, o.requests.cpu)},
      {"memory", pick(r.resources.memory, o.requests.memory)},
      {"ephemeral-storage", pick(r.resources.ephemeral_storage, o.requests.ephemeral_storage)}};
  c["resources"] = {{"requests", requests}};
  if (r.engine.device != "cpu") {
    c["resources"]["requests"]["nvidia.com/gpu"] = "1";
    c["resources"]["limits"] = {{"nvidia.com/gpu", "1"}};
  }
  return c;
}

// The values the API server takes (the CRD's enums); anything else would be refused with the
// whole Deployment, so it is refused here with the field's name.
void check_toleration(const std::map<std::string, std::string>& t, std::size_t index) {
  const std::string field = "spec.placement.tolerations[" + std::to_string(index) + "].";
  const auto op = t.find("operator");
  if (op != t.end() && op->second != "Exists" && op->second != "Equal")
    throw RenderError(field + "operator: '" + op->second + "' is not Exists or Equal");
  const auto effect = t.find("effect");
  if (effect != t.end() && effect->second != "NoSchedule" && effect->second != "PreferNoSchedule" &&
      effect->second != "NoExecute")
    throw RenderError(field + "effect: '" + effect->second +
                      "' is not NoSchedule, PreferNoSchedule or NoExecute");
}

json tolerations(const recipe::Placement& p) {
  json out = json::array();
  for (std::size_t i = 0; i < p.tolerations.size(); ++i) {
    const auto& t = p.tolerations[i];
    check_toleration(t, i);
    json entry = json::object();
    for (const auto& [key, value] : t) {
      if (key == "tolerationSeconds") {
        entry[key] = std::stoll(value);  // an integer in the API, kept as text by the parser
      } else {
        entry[key] = value;
      }
    }
    out.push_back(entry);
  }
  return out;
}

// soloOnly: no other nibble engine (of any recipe, in any namespace) on the same node. The
// scheduler honours a required anti-affinity both ways, so later engines keep off it too.
json solo_affinity() {
  return {{"podAntiAffinity",
           {{"requiredDuringSchedulingIgnoredDuringExecution",
             json::array(
                 {{{"labelSelector", {{"matchLabels", {{"app.kubernetes.io/name", kEngineName}}}}},
                   {"namespaceSelector", json::object()},
                   {"topologyKey", "kubernetes.io/hostname"}}})}}}};
}

// The model's weights, and a draft model's, where the engine reads them: hf:// sources in the
// cache volume ("models", at /models), fetched by an init container each; file paths mounted
// read-only from the node where the recipe says (the model's volume "models", a draft's
// "draft-model", or the model's own mount when both are the same directory). A recipe whose
// model is a file and whose draft comes from the Hub gets the cache volume as "model-cache".
void place_models(const recipe::ModelRecipe& r, const RenderOptions& o, json& volumes, json& mounts,
                  json& init) {
  // A volume and its read-only mount; a draft model's may not take a path mounted already.
  const auto mount = [&](json volume, const std::string& path, bool for_draft) {
    const std::string name = volume["name"];
    for (const json& m : mounts) {
      if (for_draft && m["mountPath"] == path) {
        throw RenderError(std::string(recipe::kSpeculativeConfigField) +
                          ": the draft model needs volume " + name + " at " + path +
                          ", where the pod mounts " + m["name"].get<std::string>() +
                          " already; stage the models in separate directories");
      }
    }
    volumes.push_back(std::move(volume));
    mounts.push_back({{"name", name}, {"mountPath", path}, {"readOnly", true}});
  };
  const auto cache = [&](const char* name) {
    json volume = cache_volume(o.model_cache);
    volume["name"] = name;
    return volume;
  };
  const auto host_path = [](const char* name, const std::string& path) {
    return json{{"name", name}, {"hostPath", {{"path", path}, {"type", "Directory"}}}};
  };
  using Kind = recipe::ModelSource::Kind;
  switch (r.source.kind) {
    case Kind::kHuggingFace:
      mount(cache("models"), kModelMountPath, false);
      init.push_back(download_container("model-download", r.source, "models", o));
      break;
    case Kind::kFile:
      // The weights are staged on the node; the engine reads them where the recipe says.
      mount(host_path("models", r.source.path), r.source.path, false);
      break;
  }
  if (!r.engine.draft_model) return;
  const recipe::ModelSource& draft = *r.engine.draft_model;
  switch (draft.kind) {
    case Kind::kHuggingFace: {
      const char* volume = r.source.kind == Kind::kHuggingFace ? "models" : "model-cache";
      if (r.source.kind != Kind::kHuggingFace) mount(cache(volume), kModelMountPath, true);
      // Its own init container: the model's may be done (or cached) while the draft's is not.
      init.push_back(download_container("model-download-draft", draft, volume, o));
      break;
    }
    case Kind::kFile:
      if (r.source.kind == Kind::kFile && draft.path == r.source.path) break;  // mounted already
      mount(host_path("draft-model", draft.path), draft.path, true);
      break;
  }
}

json pod_spec(const recipe::ModelRecipe& r, const RenderOptions& o) {
  // The key file is readable by the engine's group (fsGroup) only.
  json volumes = json::array(
      {{{"name", "tmp"}, {"emptyDir", json::object()}},
       {{"name", "engine-key"},
        {"secret",
         {{"secretName", engine_key_secret_name(r.name)},
          {"defaultMode", 0440},
          {"items", json::array({{{"key", kEngineKeyField}, {"path", kEngineKeyField}}})}}}}});
  json mounts = json::array(
      {{{"name", "tmp"}, {"mountPath", "/tmp"}},
       {{"name", "engine-key"}, {"mountPath", kEngineKeyMountPath}, {"readOnly", true}}});
  json init = json::array();
  place_models(r, o, volumes, mounts, init);
  json spec = {{"securityContext",
                {{"runAsNonRoot", true},
                 {"runAsUser", o.run_as_user},
                 {"runAsGroup", o.run_as_user},
                 {"fsGroup", o.run_as_user},
                 {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
               {"automountServiceAccountToken", false},  // engines never call the API server
               {"enableServiceLinks", false},
               {"terminationGracePeriodSeconds", o.drain_seconds + kDeregistrationSeconds},
               {"containers", json::array({engine_container(r, o, std::move(mounts))})},
               {"volumes", volumes}};
  if (!init.empty()) spec["initContainers"] = init;
  if (!o.runtime_class.empty()) spec["runtimeClassName"] = o.runtime_class;
  if (!o.image_pull_secrets.empty()) {
    spec["imagePullSecrets"] = json::array();
    for (const std::string& name : o.image_pull_secrets)
      spec["imagePullSecrets"].push_back({{"name", name}});
  }
  if (!r.placement.node_selector.empty()) spec["nodeSelector"] = r.placement.node_selector;
  if (!r.placement.tolerations.empty()) spec["tolerations"] = tolerations(r.placement);
  if (r.placement.solo_only) spec["affinity"] = solo_affinity();
  return spec;
}

}  // namespace

json selector_labels(const std::string& recipe) {
  return {{"app.kubernetes.io/name", kEngineName}, {kRecipeLabel, recipe}};
}

std::string pod_selector(const std::string& recipe) {
  const json labels = selector_labels(recipe);
  std::string out;
  for (auto it = labels.begin(); it != labels.end(); ++it)
    out += (out.empty() ? "" : ",") + it.key() + "=" + it.value().get<std::string>();
  return out;
}

std::string service_name(const std::string& recipe) {
  if (!recipe.empty() && recipe[0] >= 'a' && recipe[0] <= 'z') return recipe;
  return ("r-" + recipe).substr(0, 63);
}

std::string engine_key_secret_name(const std::string& recipe) {
  return recipe + "-engine-key";
}

json engine_key_secret(const recipe::ModelRecipe& r, const std::string& key, const Owner& owner,
                       const RenderOptions& o) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", metadata(engine_key_secret_name(r.name), r, owner, o)},
          {"type", "Opaque"},
          {"immutable", true},
          {"stringData", {{kEngineKeyField, key}}}};
}

std::string describe(const ModelCache& cache) {
  switch (cache.kind) {
    case ModelCache::Kind::kPersistentVolumeClaim:
      return "pvc/" + cache.claim_name;
    case ModelCache::Kind::kHostPath:
      return "hostPath " + cache.host_path;
    case ModelCache::Kind::kEmptyDir:
      break;
  }
  return cache.size_limit.empty() ? "emptyDir" : "emptyDir sizeLimit=" + cache.size_limit;
}

std::string model_dir_in_pod(const recipe::ModelSource& source) {
  switch (source.kind) {
    case recipe::ModelSource::Kind::kHuggingFace:
      return source::model_cache_dir(source, kModelMountPath).string();
    case recipe::ModelSource::Kind::kFile:
      break;
  }
  if (source.path.empty() || source.path[0] != '/') {
    throw RenderError("spec.model.source: '" + source.original +
                      "' is a relative path; on Kubernetes a file source must be an absolute "
                      "path on the node (or use hf://org/name)");
  }
  return source.path;
}

std::vector<json> RecipeObjects::all() const {
  std::vector<json> out = {deployment, service, disruption_budget};
  if (!pod_monitor.is_null()) out.push_back(pod_monitor);
  return out;
}

RecipeObjects recipe_objects(const recipe::ModelRecipe& r, const std::string& revision,
                             int replicas, const Owner& owner, const RenderOptions& o) {
  RecipeObjects out;
  json deployment_meta = metadata(r.name, r, owner, o);
  deployment_meta["annotations"] = {{kSpecHashAnnotation, revision},
                                    {"nibble.dev/generation", std::to_string(r.generation)}};
  out.deployment = {
      {"apiVersion", "apps/v1"},
      {"kind", "Deployment"},
      {"metadata", deployment_meta},
      {"spec",
       {{"replicas", replicas},
        {"selector", {{"matchLabels", selector_labels(r.name)}}},
        // As the local backend rolls: one new pod beyond the count, an old one goes only when
        // a new one is ready.
        {"strategy",
         {{"type", "RollingUpdate"}, {"rollingUpdate", {{"maxSurge", 1}, {"maxUnavailable", 0}}}}},
        {"revisionHistoryLimit", 3},
        {"progressDeadlineSeconds", o.startup_timeout_seconds + 600},
        {"template",
         {{"metadata",
           {{"labels", labels(r, revision)}, {"annotations", {{kSpecHashAnnotation, revision}}}}},
          {"spec", pod_spec(r, o)}}}}}};
  out.service = {{"apiVersion", "v1"},
                 {"kind", "Service"},
                 {"metadata", metadata(service_name(r.name), r, owner, o)},
                 {"spec",
                  {{"type", "ClusterIP"},
                   {"selector", selector_labels(r.name)},
                   {"ports", json::array({{{"name", "http"},
                                           {"port", kEnginePort},
                                           {"targetPort", "http"},
                                           {"protocol", "TCP"}}})}}}};
  out.disruption_budget = {
      {"apiVersion", "policy/v1"},
      {"kind", "PodDisruptionBudget"},
      {"metadata", metadata(r.name, r, owner, o)},
      {"spec", {{"selector", {{"matchLabels", selector_labels(r.name)}}}, {"maxUnavailable", 1}}}};
  if (o.pod_monitor) {
    out.pod_monitor = {
        {"apiVersion", "monitoring.coreos.com/v1"},
        {"kind", "PodMonitor"},
        {"metadata", metadata(r.name, r, owner, o)},
        {"spec",
         {{"selector", {{"matchLabels", selector_labels(r.name)}}},
          {"podMetricsEndpoints",
           json::array({{{"port", "http"}, {"path", "/metrics"}, {"interval", "15s"}}})}}}};
  }
  return out;
}

}  // namespace nibble::kube
