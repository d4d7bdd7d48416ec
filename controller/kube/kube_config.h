#pragma once
// Where the API server is and how to authenticate to it, from the two places a controller finds
// it: in-cluster (the pod's service account: token, CA and namespace files, and the
// KUBERNETES_SERVICE_HOST/PORT environment) or a kubeconfig file (--kubeconfig or $KUBECONFIG:
// the current or named context's cluster server, CA data or file, and the user's client
// certificate and key or bearer token). File references are kept as paths where they may be
// rotated (the service-account token); everything else is read once into PEM text.
// Errors throw KubeConfigError naming the file and the field.
#include <map>
#include <stdexcept>
#include <string>

namespace nibble::kube {

class KubeConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct KubeConfig {
  std::string server;  // https://host:port (http:// accepted, e.g. for a local test server)
  std::string ca_pem;  // trusted CA certificates; empty: the system's default store
  bool insecure_skip_tls_verify = false;
  std::string client_cert_pem;  // client certificate authentication (both or neither)
  std::string client_key_pem;
  std::string token;       // a fixed bearer token
  std::string token_file;  // a bearer token read from this file, re-read when it changes
  std::string namespace_name = "default";  // the namespace of the context or the pod
  std::string source;                      // "in-cluster" or the kubeconfig path, for logs
};

struct InClusterFiles {
  std::string token = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  std::string namespace_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
};

// Throws unless KUBERNETES_SERVICE_HOST/PORT are set (in `env`) and the token and CA exist.
KubeConfig load_in_cluster_config(const std::map<std::string, std::string>& env,
                                  const InClusterFiles& files = {});

// `context` empty: the file's current-context.
KubeConfig load_kubeconfig(const std::string& path, const std::string& context = "");
KubeConfig parse_kubeconfig(const std::string& yaml_text, const std::string& base_dir,
                            const std::string& context, const std::string& source);

// The order client-go follows: an explicit --kubeconfig, then the first existing file of
// $KUBECONFIG (':'-separated), then in-cluster, then ~/.kube/config. `env` is the process
// environment as a map so that tests pass their own.
KubeConfig resolve_kube_config(const std::string& kubeconfig_flag,
                               const std::map<std::string, std::string>& env,
                               const InClusterFiles& files = {});
std::map<std::string, std::string> process_environment();

// Standard base64 (RFC 4648) with padding; whitespace is skipped. Throws KubeConfigError.
std::string base64_decode(const std::string& text);
// Standard base64 with padding (a Secret's data).
std::string base64_encode(const std::string& bytes);

}  // namespace nibble::kube
