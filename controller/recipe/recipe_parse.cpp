#include "controller/recipe/recipe_parse.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <set>
#include <sstream>

#include "controller/recipe/extra_args.h"
#include "controller/recipe/speculative_recipe.h"

namespace nibble::recipe {
namespace {

// A Kubernetes resource quantity as requests take it: digits, an optional fraction, an optional
// decimal exponent or suffix (m, k, M, G, T, P, E, Ki .. Ei). No sign: a request is not negative.
bool is_kube_quantity(const std::string& q) {
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t start = i;
    while (i < q.size() && q[i] >= '0' && q[i] <= '9') ++i;
    return i > start;
  };
  if (!digits()) return false;
  if (i < q.size() && q[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  const std::string suffix = q.substr(i);
  static const std::set<std::string> suffixes = {"",  "m",  "k",  "M",  "G",  "T",  "P",
                                                 "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  if (suffixes.count(suffix) > 0) return true;
  if (suffix.size() >= 2 && (suffix[0] == 'e' || suffix[0] == 'E')) {  // 5e3
    i += 1;
    return digits() && i == q.size();
  }
  return false;
}

// Reads one YAML mapping: typed getters record errors under `path`, and finish() reports
// every key that no getter asked for.
class MappingReader {
 public:
  MappingReader(const YAML::Node& node, std::string path, std::vector<FieldError>& errors)
      : node_(node), path_(std::move(path)), errors_(errors) {
    if (node_ && !node_.IsNull() && !node_.IsMap()) {
      error("", "must be a mapping");
      node_ = YAML::Node();
    }
  }

  std::string field(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }
  void error(const std::string& key, const std::string& message) {
    errors_.push_back({key.empty() ? path_ : field(key), message});
  }

  YAML::Node child(const std::string& key) {
    seen_.insert(key);
    if (!node_ || !node_.IsMap()) return YAML::Node();
    return node_[key];
  }

  bool has(const std::string& key) {
    YAML::Node v = child(key);
    return v && !v.IsNull();
  }

  std::string string(const std::string& key, const std::string& fallback) {
    YAML::Node v = child(key);
    if (!v || v.IsNull()) return fallback;
    if (!v.IsScalar()) {
      error(key, "must be a string");
      return fallback;
    }
    return v.as<std::string>();
  }

  std::string one_of(const std::string& key, const std::string& fallback,
                     std::initializer_list<const char*> choices) {
    const std::string v = string(key, fallback);
    for (const char* c : choices) {
      if (v == c) return v;
    }
    std::string list;
    for (const char* c : choices) list += std::string(list.empty() ? "" : ", ") + c;
    error(key, "must be one of " + list + ", got '" + v + "'");
    return fallback;
  }

  bool boolean(const std::string& key, bool fallback) {
    YAML::Node v = child(key);
    if (!v || v.IsNull()) return fallback;
    bool out = fallback;
    if (!v.IsScalar() || !YAML::convert<bool>::decode(v, out)) error(key, "must be true or false");
    return out;
  }

  double number(const std::string& key, double fallback, double lo, double hi) {
    YAML::Node v = child(key);
    if (!v || v.IsNull()) return fallback;
    double out = fallback;
    if (!v.IsScalar() || !YAML::convert<double>::decode(v, out) || !std::isfinite(out)) {
      error(key, "must be a number");
      return fallback;
    }
    if (out < lo || out > hi) {
      std::ostringstream m;
      m << "must be between " << lo << " and " << hi << ", got " << out;
      error(key, m.str());
      return fallback;
    }
    return out;
  }

  int integer(const std::string& key, int fallback, long long lo, long long hi) {
    YAML::Node v = child(key);
    if (!v || v.IsNull()) return fallback;
    long long out = 0;
    if (!v.IsScalar() || !YAML::convert<long long>::decode(v, out)) {
      error(key, "must be an integer");
      return fallback;
    }
    if (out < lo || out > hi) {
      error(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " +
                     std::to_string(out));
      return fallback;
    }
    return int(out);
  }

  std::map<std::string, std::string> string_map(const std::string& key) {
    std::map<std::string, std::string> out;
    YAML::Node v = child(key);
    if (!v || v.IsNull()) return out;
    if (!v.IsMap()) {
      error(key, "must be a mapping of strings");
      return out;
    }
    for (const auto& item : v) {
      if (!item.second.IsScalar()) {
        error(key, "value of '" + item.first.as<std::string>() + "' must be a string");
        continue;
      }
      out[item.first.as<std::string>()] = item.second.as<std::string>();
    }
    return out;
  }

  std::vector<std::string> string_list(const std::string& key) {
    std::vector<std::string> out;
    YAML::Node v = child(key);
    if (!v || v.IsNull()) return out;
    if (!v.IsSequence()) {
      error(key, "must be a list of strings");
      return out;
    }
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].IsScalar()) {
        error(key + "[" + std::to_string(i) + "]", "must be a string");
        continue;
      }
      out.push_back(v[i].as<std::string>());
    }
    return out;
  }

  // Reports keys nobody read: unknown (or misspelled) fields.
  void finish() {
    if (!node_ || !node_.IsMap()) return;
    for (const auto& item : node_) {
      const std::string key = item.first.as<std::string>();
      if (!seen_.count(key)) error(key, "unknown field");
    }
  }

 private:
  YAML::Node node_;
  std::string path_;
  std::vector<FieldError>& errors_;
  std::set<std::string> seen_;
};

void parse_engine(const YAML::Node& node, EngineSettings& e, std::vector<FieldError>& errors) {
  MappingReader r(node, "spec.engine", errors);
  if (r.has("maxModelLen")) e.max_model_len = r.integer("maxModelLen", 0, 16, 1 << 24);
  e.max_num_seqs = r.integer("maxNumSeqs", e.max_num_seqs, 1, 65536);
  if (r.has("maxNumBatchedTokens"))
    e.max_num_batched_tokens = r.integer("maxNumBatchedTokens", 0, 1, 1 << 24);
  e.kv_cache_dtype = r.one_of("kvCacheDtype", e.kv_cache_dtype, {"auto", "bf16", "fp8"});
  e.gpu_memory_utilization = r.number("gpuMemoryUtilization", e.gpu_memory_utilization, 0.05, 1.0);
  e.enable_prefix_caching = r.boolean("enablePrefixCaching", e.enable_prefix_caching);
  e.quantization = r.one_of("quantization", e.quantization, {"", "nvfp4"});
  e.device = r.one_of("device", e.device, {"auto", "cpu", "cuda"});
  e.speculative_config = r.string("speculativeConfig", "");
  if (!e.speculative_config.empty())
    e.draft_model = parse_speculative_field(e.speculative_config, errors);
  e.extra_args = r.string_list("extraArgs");
  check_extra_args(e.extra_args, errors);
  r.finish();
}

}  // namespace

bool is_dns1123_label(const std::string& name) {
  if (name.empty() || name.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  for (char c : name) {
    if (!alnum(c) && c != '-') return false;
  }
  return true;
}

ModelSource parse_model_source(const std::string& source, std::vector<FieldError>& errors,
                               const std::string& field) {
  ModelSource s;
  s.original = source;
  if (source.empty()) {
    errors.push_back({field, "is required (hf://org/name[@revision], file:///path or a path)"});
  } else if (source.starts_with("hf://")) {
    s.kind = ModelSource::Kind::kHuggingFace;
    std::string rest = source.substr(5);
    const auto at = rest.find('@');
    s.revision = at == std::string::npos ? "main" : rest.substr(at + 1);
    s.repo = rest.substr(0, at);
    const auto slash = s.repo.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == s.repo.size() ||
        s.repo.find('/', slash + 1) != std::string::npos || s.revision.empty()) {
      errors.push_back({field, "'" + source + "' is not hf://org/name or hf://org/name@revision"});
    } else if (const std::string org = s.repo.substr(0, slash), name = s.repo.substr(slash + 1);
               org == "." || org == ".." || name == "." || name == ".." || s.revision == "." ||
               s.revision.find("..") != std::string::npos) {
      // The cache directory is built from these (source/model_downloader.h): none may step
      // out of it.
      errors.push_back({field, "'" + source +
                                   "': org, name and revision must not be '.' or "
                                   "contain '..'"});
    }
  } else if (source.starts_with("file://")) {
    s.path = source.substr(7);
    if (!s.path.starts_with("/"))
      errors.push_back({field, "file:// needs an absolute path, got '" + source + "'"});
  } else if (source.find("://") != std::string::npos) {
    errors.push_back(
        {field, "unsupported scheme in '" + source + "' (use hf://, file:// or a path)"});
  } else {
    s.path = source;
  }
  return s;
}

namespace {
ParseResult parse_checked(const std::string& text);
}  // namespace

ParseResult parse_model_recipe(const std::string& text) {
  ParseResult result;
  try {
    result = parse_checked(text);
  } catch (const YAML::Exception& e) {  // e.g. a mapping key that is not a string
    result.errors.push_back({"", std::string("malformed recipe: ") + e.what()});
  }
  return result;
}

namespace {

ParseResult parse_checked(const std::string& text) {
  ParseResult result;
  auto& errors = result.errors;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    errors.push_back({"", std::string("not valid YAML or JSON: ") + e.what()});
    return result;
  }
  if (!root.IsMap()) {
    errors.push_back({"", "a recipe must be a mapping with apiVersion, kind, metadata and spec"});
    return result;
  }
  MappingReader top(root, "", errors);
  const std::string api = top.string("apiVersion", "");
  if (api != kApiVersion)
    top.error("apiVersion", std::string("must be ") + kApiVersion + ", got '" + api + "'");
  const std::string kind = top.string("kind", "");
  if (kind != kKind) top.error("kind", std::string("must be ") + kKind + ", got '" + kind + "'");

  ModelRecipe& r = result.recipe;
  {
    MappingReader meta(top.child("metadata"), "metadata", errors);
    r.name = meta.string("name", "");
    if (!is_dns1123_label(r.name)) {
      meta.error("name",
                 "must be a DNS-1123 label (lowercase letters, digits and '-', 1-63 "
                 "characters, starting and ending with a letter or digit), got '" +
                     r.name + "'");
    }
    r.labels = meta.string_map("labels");
    // Fields Kubernetes fills in are accepted and ignored here.
    for (const char* k : {"namespace", "annotations", "uid", "resourceVersion", "generation",
                          "creationTimestamp", "managedFields", "finalizers"}) {
      meta.child(k);
    }
    meta.finish();
  }
  MappingReader spec(top.child("spec"), "spec", errors);
  if (!top.has("spec")) top.error("spec", "is required");
  {
    MappingReader model(spec.child("model"), "spec.model", errors);
    r.source = parse_model_source(model.string("source", ""), errors);
    r.served_name = model.string("servedName", r.name);
    if (r.served_name.empty()) model.error("servedName", "must not be empty");
    model.finish();
  }
  parse_engine(spec.child("engine"), r.engine, errors);
  {
    MappingReader rep(spec.child("replicas"), "spec.replicas", errors);
    r.replicas.min = rep.integer("min", 1, 0, 1024);
    r.replicas.max = rep.integer("max", std::max(r.replicas.min, 1), 1, 1024);
    if (r.replicas.max < r.replicas.min) {
      rep.error("max", "must be >= min (" + std::to_string(r.replicas.min) + "), got " +
                           std::to_string(r.replicas.max));
    }
    // Outside [min, max] is valid (the CRD allows it, an HPA may write it): it is clamped.
    if (const YAML::Node d = rep.child("desired"); d && !d.IsNull())
      r.replicas.desired = rep.integer("desired", 0, 0, 1024);
    rep.finish();
  }
  {
    MappingReader as(spec.child("autoscaling"), "spec.autoscaling", errors);
    r.autoscaling.enabled = as.boolean("enabled", true);
    r.autoscaling.metric = as.one_of("metric", r.autoscaling.metric,
                                     {"inflight", "running", "waiting", "kv_cache_usage"});
    const double hi = r.autoscaling.metric == "kv_cache_usage" ? 1.0 : 1e6;
    r.autoscaling.target_per_replica = as.number(
        "targetPerReplica", r.autoscaling.metric == "kv_cache_usage" ? 0.8 : 8.0, 1e-6, hi);
    r.autoscaling.scale_down_delay_seconds = as.integer("scaleDownDelaySeconds", 300, 0, 86400);
    r.autoscaling.idle_seconds_before_zero = as.integer("idleSecondsBeforeZero", 600, 1, 7 * 86400);
    as.finish();
  }
  {
    MappingReader pl(spec.child("placement"), "spec.placement", errors);
    r.placement.solo_only = pl.boolean("soloOnly", false);
    r.placement.node_selector = pl.string_map("nodeSelector");
    YAML::Node tol = pl.child("tolerations");
    if (tol && !tol.IsNull()) {
      if (!tol.IsSequence()) {
        pl.error("tolerations", "must be a list of mappings");
      } else {
        for (std::size_t i = 0; i < tol.size(); ++i) {
          MappingReader t(tol[i], "spec.placement.tolerations[" + std::to_string(i) + "]", errors);
          std::map<std::string, std::string> entry;
          for (const char* k : {"key", "operator", "value", "effect"}) {
            if (t.has(k)) entry[k] = t.string(k, "");
          }
          if (t.has("tolerationSeconds"))
            entry["tolerationSeconds"] =
                std::to_string(t.integer("tolerationSeconds", 0, 0, 1 << 30));
          t.finish();
          r.placement.tolerations.push_back(entry);
        }
      }
    }
    pl.finish();
  }
  {
    MappingReader res(spec.child("resources"), "spec.resources", errors);
    auto quantity = [&](const char* key) {
      const std::string q = res.string(key, "");
      if (!q.empty() && !is_kube_quantity(q))
        res.error(key, "must be a Kubernetes quantity such as 4, 500m or 32Gi (got '" + q + "')");
      return q;
    };
    r.resources.cpu = quantity("cpu");
    r.resources.memory = quantity("memory");
    r.resources.ephemeral_storage = quantity("ephemeralStorage");
    res.finish();
  }
  spec.child("status");
  spec.finish();
  top.child("status");  // written by the controller; ignored on input
  top.finish();
  return result;
}

}  // namespace

std::string ParseResult::error_text() const {
  std::string out;
  for (const FieldError& e : errors)
    out += (e.field.empty() ? "recipe" : e.field) + ": " + e.message + "\n";
  return out;
}

std::vector<std::string> engine_args(const ModelRecipe& r, const std::string& draft_model_dir) {
  const EngineSettings& e = r.engine;
  std::vector<std::string> args = {"--served-model-name",
                                   r.served_name,
                                   "--max-num-seqs",
                                   std::to_string(e.max_num_seqs),
                                   "--kv-cache-dtype",
                                   e.kv_cache_dtype,
                                   "--gpu-memory-utilization",
                                   std::to_string(e.gpu_memory_utilization),
                                   "--device",
                                   e.device};
  if (e.max_model_len) {
    args.push_back("--max-model-len");
    args.push_back(std::to_string(*e.max_model_len));
  }
  if (e.max_num_batched_tokens) {
    args.push_back("--max-num-batched-tokens");
    args.push_back(std::to_string(*e.max_num_batched_tokens));
  }
  if (!e.enable_prefix_caching) args.push_back("--no-enable-prefix-caching");
  if (!e.quantization.empty()) {
    args.push_back("--quantization");
    args.push_back(e.quantization);
  }
  if (!e.speculative_config.empty()) {
    args.push_back("--speculative-config");
    args.push_back(engine_speculative_config(e.speculative_config, draft_model_dir));
  }
  args.insert(args.end(), e.extra_args.begin(), e.extra_args.end());
  return args;
}

}  // namespace nibble::recipe
