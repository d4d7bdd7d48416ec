// Kubeconfig and in-cluster configuration: contexts, base64 data and files, tokens, errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "controller/kube/kube_config.h"
#include "tests/support/temp_dir.h"

namespace nibble::kube {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

TEST(Base64, DecodesWithPaddingAndWhitespace) {
  EXPECT_EQ(base64_decode("aGVsbG8="), "hello");
  EXPECT_EQ(base64_decode("aGVs\nbG8h"), "hello!");
  EXPECT_EQ(base64_decode("aA=="), "h");
  EXPECT_EQ(base64_decode(""), "");
  EXPECT_THROW(base64_decode("aGVsbG8"), KubeConfigError);   // length
  EXPECT_THROW(base64_decode("aGV*bG8="), KubeConfigError);  // alphabet
  EXPECT_THROW(base64_decode("aA==aA=="), KubeConfigError);  // data after padding
}

const char* const kKubeconfig = R"(apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev-cluster
  cluster:
    server: https://10.1.2.3:6443/
    certificate-authority-data: Q0EgUEVN
- name: lab-cluster
  cluster:
    server: http://127.0.0.1:8080
    certificate-authority: ca.pem
contexts:
- name: dev
  context: {cluster: dev-cluster, user: alice, namespace: models}
- name: lab
  context: {cluster: lab-cluster, user: bob}
users:
- name: alice
  user:
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZ
- name: bob
  user:
    token: s3cret
)";

TEST(Kubeconfig, CurrentContextWithBase64Data) {
  const KubeConfig c = parse_kubeconfig(kKubeconfig, "/nowhere", "", "test");
  EXPECT_EQ(c.server, "https://10.1.2.3:6443");  // trailing slash dropped
  EXPECT_EQ(c.ca_pem, "CA PEM");
  EXPECT_EQ(c.client_cert_pem, "CERT");
  EXPECT_EQ(c.client_key_pem, "KEY");
  EXPECT_EQ(c.token, "");
  EXPECT_EQ(c.namespace_name, "models");
}

TEST(Kubeconfig, NamedContextWithFileRelativeToTheKubeconfigAndToken) {
  nibble::testing::TempDir dir;
  write(dir.path() / "ca.pem", "FILE CA");
  write(dir.path() / "config", kKubeconfig);
  const KubeConfig c = load_kubeconfig((dir.path() / "config").string(), "lab");
  EXPECT_EQ(c.server, "http://127.0.0.1:8080");
  EXPECT_EQ(c.ca_pem, "FILE CA");
  EXPECT_EQ(c.token, "s3cret");
  EXPECT_EQ(c.namespace_name, "default");
  EXPECT_EQ(c.source, (dir.path() / "config").string());
}

TEST(Kubeconfig, ErrorsNameTheFieldAndTheEntry) {
  try {
    parse_kubeconfig(kKubeconfig, "", "staging", "cfg.yaml");
    FAIL() << "expected an error";
  } catch (const KubeConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("no context named 'staging'"), std::string::npos)
        << e.what();
  }
  const std::string bad_server = R"(current-context: a
clusters: [{name: c, cluster: {server: "10.0.0.1:6443"}}]
contexts: [{name: a, context: {cluster: c}}]
)";
  try {
    parse_kubeconfig(bad_server, "", "", "cfg.yaml");
    FAIL() << "expected an error";
  } catch (const KubeConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("clusters[c].cluster.server"), std::string::npos);
  }
  const std::string half_cert = R"(current-context: a
clusters: [{name: c, cluster: {server: "https://h"}}]
contexts: [{name: a, context: {cluster: c, user: u}}]
users: [{name: u, user: {client-certificate-data: Q0VSVA==}}]
)";
  EXPECT_THROW(parse_kubeconfig(half_cert, "", "", "cfg"), KubeConfigError);
  const std::string exec_only = R"(current-context: a
clusters: [{name: c, cluster: {server: "https://h"}}]
contexts: [{name: a, context: {cluster: c, user: u}}]
users: [{name: u, user: {exec: {command: aws}}}]
)";
  try {
    parse_kubeconfig(exec_only, "", "", "cfg");
    FAIL() << "expected an error";
  } catch (const KubeConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("not supported"), std::string::npos);
  }
  EXPECT_THROW(parse_kubeconfig("[1, 2]", "", "", "cfg"), KubeConfigError);
  EXPECT_THROW(load_kubeconfig("/no/such/kubeconfig"), KubeConfigError);
}

TEST(InCluster, ReadsServiceAccountFilesAndEnvironment) {
  nibble::testing::TempDir dir;
  InClusterFiles files{(dir.path() / "token").string(), (dir.path() / "ca.crt").string(),
                       (dir.path() / "namespace").string()};
  write(files.token, "tok\n");
  write(files.ca, "CLUSTER CA");
  write(files.namespace_file, "nibble-system\n");
  const std::map<std::string, std::string> env = {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                                                  {"KUBERNETES_SERVICE_PORT", "443"}};
  const KubeConfig c = load_in_cluster_config(env, files);
  EXPECT_EQ(c.server, "https://10.96.0.1:443");
  EXPECT_EQ(c.token_file, files.token);  // a path: the client re-reads it when rotated
  EXPECT_EQ(c.ca_pem, "CLUSTER CA");
  EXPECT_EQ(c.namespace_name, "nibble-system");

  const KubeConfig v6 = load_in_cluster_config(
      {{"KUBERNETES_SERVICE_HOST", "fd00::1"}, {"KUBERNETES_SERVICE_PORT", "443"}}, files);
  EXPECT_EQ(v6.server, "https://[fd00::1]:443");
  EXPECT_THROW(load_in_cluster_config({}, files), KubeConfigError);
  write(files.token, "\n");
  EXPECT_THROW(load_in_cluster_config(env, files), KubeConfigError);
}

TEST(ResolveKubeConfig, FlagThenKubeconfigEnvThenInClusterThenHome) {
  nibble::testing::TempDir dir;
  write(dir.path() / "config", kKubeconfig);
  fs::create_directories(dir.path() / "home/.kube");
  write(dir.path() / "home/.kube/config", kKubeconfig);
  const std::string cfg = (dir.path() / "config").string();
  EXPECT_EQ(resolve_kube_config(cfg, {}).source, cfg);
  // The first existing file of $KUBECONFIG.
  EXPECT_EQ(resolve_kube_config("", {{"KUBECONFIG", "/missing:" + cfg}}).source, cfg);
  EXPECT_EQ(resolve_kube_config("", {{"HOME", (dir.path() / "home").string()}}).source,
            (dir.path() / "home/.kube/config").string());
  EXPECT_THROW(resolve_kube_config("", {{"HOME", "/nonexistent"}}), KubeConfigError);
  // In-cluster wins over ~/.kube/config when the service environment is there.
  InClusterFiles files{(dir.path() / "t").string(), (dir.path() / "ca").string(),
                       (dir.path() / "ns").string()};
  write(files.token, "t");
  write(files.ca, "ca");
  const KubeConfig in = resolve_kube_config("",
                                            {{"HOME", (dir.path() / "home").string()},
                                             {"KUBERNETES_SERVICE_HOST", "10.0.0.1"},
                                             {"KUBERNETES_SERVICE_PORT", "6443"}},
                                            files);
  EXPECT_EQ(in.source, "in-cluster");
}

}  // namespace
}  // namespace nibble::kube
