#include "controller/kube/kube_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

extern char** environ;

namespace nibble::kube {

namespace fs = std::filesystem;

namespace {

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw KubeConfigError("cannot read " + what + " " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t begin = 0;
  while (begin < s.size() && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  return s.substr(begin);
}

std::string lookup(const std::map<std::string, std::string>& env, const std::string& name) {
  const auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

// A relative path in a kubeconfig is relative to the kubeconfig's folder.
std::string resolve_path(const std::string& path, const std::string& base_dir) {
  if (path.empty() || fs::path(path).is_absolute() || base_dir.empty()) return path;
  return (fs::path(base_dir) / path).string();
}

// The entry of a named list (clusters, users, contexts) with this name.
std::optional<YAML::Node> find_named(const YAML::Node& list, const std::string& name) {
  if (!list || !list.IsSequence()) return std::nullopt;
  for (const YAML::Node& entry : list) {
    if (entry.IsMap() && entry["name"] && entry["name"].IsScalar() &&
        entry["name"].as<std::string>() == name) {
      return entry;
    }
  }
  return std::nullopt;
}

std::string scalar(const YAML::Node& node, const char* key) {
  if (!node || !node[key] || !node[key].IsScalar()) return "";
  return node[key].as<std::string>();
}

// "<key>-data" (base64) wins over "<key>" (a file), as in kubectl.
std::string data_or_file(const YAML::Node& node, const std::string& key,
                         const std::string& base_dir, const std::string& where) {
  const std::string data = scalar(node, (key + "-data").c_str());
  if (!data.empty()) {
    try {
      return base64_decode(data);
    } catch (const KubeConfigError& e) {
      throw KubeConfigError(where + "." + key + "-data: " + e.what());
    }
  }
  const std::string file = scalar(node, key.c_str());
  if (file.empty()) return "";
  return read_file(resolve_path(file, base_dir), where + "." + key);
}

}  // namespace

namespace {
constexpr const char* kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}  // namespace

std::string base64_encode(const std::string& bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    unsigned chunk = 0;
    for (size_t j = 0; j < 3; ++j)
      chunk = (chunk << 8) | (j < n ? static_cast<unsigned char>(bytes[i + j]) : 0u);
    for (size_t j = 0; j < 4; ++j) out += j <= n ? kAlphabet[(chunk >> (18 - 6 * j)) & 63] : '=';
  }
  return out;
}

std::string base64_decode(const std::string& text) {
  std::string out;
  unsigned buffer = 0;
  int bits = 0;
  size_t padding = 0, symbols = 0;
  for (const char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) continue;
    if (c == '=') {
      ++padding;
      ++symbols;
      continue;
    }
    if (padding > 0) throw KubeConfigError("base64: data after '=' padding");
    const char* at = std::strchr(kAlphabet, c);
    if (at == nullptr || c == '\0') throw KubeConfigError("base64: invalid character");
    buffer = (buffer << 6) | static_cast<unsigned>(at - kAlphabet);
    bits += 6;
    ++symbols;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xFF);
    }
  }
  if (symbols % 4 != 0 || padding > 2)
    throw KubeConfigError("base64: length is not a multiple of 4");
  return out;
}

std::map<std::string, std::string> process_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

KubeConfig load_in_cluster_config(const std::map<std::string, std::string>& env,
                                  const InClusterFiles& files) {
  const std::string host = lookup(env, "KUBERNETES_SERVICE_HOST");
  const std::string port = lookup(env, "KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    throw KubeConfigError(
        "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not "
        "set (pass --kubeconfig)");
  }
  KubeConfig config;
  config.source = "in-cluster";
  // An IPv6 service address needs brackets in a URL.
  const bool ipv6 = host.find(':') != std::string::npos;
  config.server = "https://" + (ipv6 ? "[" + host + "]" : host) + ":" + port;
  config.token_file = files.token;
  if (trim(read_file(files.token, "service-account token")).empty()) {
    throw KubeConfigError("service-account token " + files.token + " is empty");
  }
  config.ca_pem = read_file(files.ca, "service-account CA");
  std::ifstream ns(files.namespace_file);
  std::string name;
  if (ns && std::getline(ns, name) && !trim(name).empty()) config.namespace_name = trim(name);
  return config;
}

KubeConfig parse_kubeconfig(const std::string& yaml_text, const std::string& base_dir,
                            const std::string& context, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw KubeConfigError(source + ": not YAML: " + e.what());
  }
  if (!root.IsMap()) throw KubeConfigError(source + ": expected a kubeconfig mapping");
  const std::string context_name = context.empty() ? scalar(root, "current-context") : context;
  if (context_name.empty()) {
    throw KubeConfigError(source +
                          ": no current-context (pick one with kubectl config use-context)");
  }
  const auto ctx_entry = find_named(root["contexts"], context_name);
  if (!ctx_entry)
    throw KubeConfigError(source + ": contexts: no context named '" + context_name + "'");
  const YAML::Node ctx = (*ctx_entry)["context"];
  const std::string cluster_name = scalar(ctx, "cluster");
  const std::string user_name = scalar(ctx, "user");
  const auto cluster_entry = find_named(root["clusters"], cluster_name);
  if (!cluster_entry) {
    throw KubeConfigError(source + ": clusters: no cluster named '" + cluster_name +
                          "' (context '" + context_name + "')");
  }
  const YAML::Node cluster = (*cluster_entry)["cluster"];

  KubeConfig config;
  config.source = source;
  config.server = scalar(cluster, "server");
  if (config.server.rfind("https://", 0) != 0 && config.server.rfind("http://", 0) != 0) {
    throw KubeConfigError(source + ": clusters[" + cluster_name +
                          "].cluster.server: expected an http(s):// URL, got '" + config.server +
                          "'");
  }
  while (config.server.size() > 8 && config.server.back() == '/') config.server.pop_back();
  const std::string where = source + ": clusters[" + cluster_name + "].cluster";
  config.ca_pem = data_or_file(cluster, "certificate-authority", base_dir, where);
  config.insecure_skip_tls_verify = scalar(cluster, "insecure-skip-tls-verify") == "true";
  const std::string ns = scalar(ctx, "namespace");
  if (!ns.empty()) config.namespace_name = ns;

  if (!user_name.empty()) {
    const auto user_entry = find_named(root["users"], user_name);
    if (!user_entry) {
      throw KubeConfigError(source + ": users: no user named '" + user_name + "' (context '" +
                            context_name + "')");
    }
    const YAML::Node user = (*user_entry)["user"];
    const std::string uwhere = source + ": users[" + user_name + "].user";
    config.client_cert_pem = data_or_file(user, "client-certificate", base_dir, uwhere);
    config.client_key_pem = data_or_file(user, "client-key", base_dir, uwhere);
    if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
      throw KubeConfigError(uwhere + ": client-certificate and client-key come together");
    }
    config.token = scalar(user, "token");
    config.token_file = resolve_path(scalar(user, "tokenFile"), base_dir);
    if (user["exec"] || user["auth-provider"]) {
      if (config.token.empty() && config.token_file.empty() && config.client_cert_pem.empty()) {
        throw KubeConfigError(uwhere +
                              ": exec and auth-provider credential plugins are not supported; "
                              "use a token, a tokenFile or a client certificate");
      }
    }
  }
  return config;
}

KubeConfig load_kubeconfig(const std::string& path, const std::string& context) {
  const std::string text = read_file(path, "kubeconfig");
  return parse_kubeconfig(text, fs::path(path).parent_path().string(), context, path);
}

KubeConfig resolve_kube_config(const std::string& kubeconfig_flag,
                               const std::map<std::string, std::string>& env,
                               const InClusterFiles& files) {
  if (!kubeconfig_flag.empty()) return load_kubeconfig(kubeconfig_flag);
  const std::string list = lookup(env, "KUBECONFIG");
  std::stringstream paths(list);
  for (std::string path; std::getline(paths, path, ':');) {
    std::error_code ec;
    if (!path.empty() && fs::exists(path, ec)) return load_kubeconfig(path);
  }
  if (!lookup(env, "KUBERNETES_SERVICE_HOST").empty()) return load_in_cluster_config(env, files);
  const std::string home = lookup(env, "HOME");
  std::error_code ec;
  if (!home.empty() && fs::exists(home + "/.kube/config", ec)) {
    return load_kubeconfig(home + "/.kube/config");
  }
  throw KubeConfigError(
      "no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, or run in a cluster");
}

}  // namespace nibble::kube
