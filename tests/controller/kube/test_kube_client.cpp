// The API client against the API-server double: verbs, typed errors, server-side apply with
// field ownership, subresources, watches with bookmarks, and TLS (CA, client certificates,
// rotated tokens) against an HTTPS double.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "controller/kube/kube_client.h"
#include "controller/kube/resource_path.h"
#include "tests/controller/kube/fake_api_server.h"
#include "tests/support/external_tool.h"
#include "tests/support/temp_dir.h"

namespace nibble::kube {
namespace {

using Json = nlohmann::json;
using testing::FakeApiServer;

KubeConfig plain_config(const FakeApiServer& server) {
  KubeConfig c;
  c.server = server.url();
  c.namespace_name = "ns";
  return c;
}

Json deployment(const std::string& name, int replicas) {
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", {{"name", name}, {"namespace", "ns"}, {"labels", {{"app", name}}}}},
          {"spec",
           {{"replicas", replicas},
            {"selector", {{"matchLabels", {{"app", name}}}}},
            {"template", {{"metadata", {{"labels", {{"app", name}}}}}}}}}};
}

template <typename F>
KubeError expect_error(F&& f) {
  try {
    f();
  } catch (const KubeError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a KubeError";
  return KubeError(-1, "", "");
}

TEST(KubeClient, CreateGetReplaceWithOptimisticConcurrency) {
  FakeApiServer server;
  server.start();
  KubeClient client(plain_config(server));
  const std::string collection = collection_path(kDeployments, "ns");
  EXPECT_EQ(collection, "/apis/apps/v1/namespaces/ns/deployments");
  const Json created = client.create(collection, deployment("web", 1));
  const std::string path = object_path(kDeployments, "ns", "web");
  Json got = client.get(path);
  EXPECT_EQ(got["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"]);

  got["spec"]["replicas"] = 3;
  const Json updated = client.replace(path, got);
  EXPECT_EQ(updated["metadata"]["generation"], 2);
  // A write carrying the old resourceVersion is a conflict.
  const KubeError stale = expect_error([&] { client.replace(path, got); });
  EXPECT_TRUE(stale.conflict());
  EXPECT_EQ(stale.reason(), "Conflict");
  EXPECT_NE(std::string(stale.what()).find("the object has been modified"), std::string::npos);

  const KubeError missing = expect_error([&] { client.get(object_path(kDeployments, "ns", "x")); });
  EXPECT_TRUE(missing.not_found());
  EXPECT_FALSE(missing.transient());
  EXPECT_TRUE(expect_error([&] { client.create(collection, deployment("web", 1)); }).conflict());

  server.fail_next("GET", "/deployments/web", 500);
  const KubeError injected = expect_error([&] { client.get(path); });
  EXPECT_EQ(injected.status(), 500);
  EXPECT_TRUE(injected.transient());
  EXPECT_EQ(client.get(path)["spec"]["replicas"], 3);  // the fault was one request

  client.remove(path);
  EXPECT_TRUE(expect_error([&] { client.get(path); }).not_found());
}

TEST(KubeClient, ServerSideApplyOwnsFieldsAndBumpsGenerationOnSpecChangesOnly) {
  FakeApiServer server;
  server.start();
  KubeClient client(plain_config(server));
  const std::string path = object_path(kDeployments, "ns", "web");
  const Json first = client.apply(path, deployment("web", 2));
  EXPECT_EQ(first["metadata"]["generation"], 1);
  EXPECT_EQ(server.count_requests("PATCH", "/deployments/web"), 1);
  // The same apply again changes nothing: same resourceVersion.
  const Json again = client.apply(path, deployment("web", 2));
  EXPECT_EQ(again["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"]);
  // A label change is not a spec change; a replicas change is.
  Json labelled = deployment("web", 2);
  labelled["metadata"]["labels"]["tier"] = "gpu";
  EXPECT_EQ(client.apply(path, labelled)["metadata"]["generation"], 1);
  const Json scaled = client.apply(path, deployment("web", 4));
  EXPECT_EQ(scaled["metadata"]["generation"], 2);
  EXPECT_EQ(scaled["metadata"]["labels"].count("tier"), 0u);  // no longer applied: removed

  // Another manager that applies a field we own without force is refused.
  KubeClientOptions other_options;
  other_options.field_manager = "kubectl";
  KubeClient other(plain_config(server), other_options);
  const KubeError owned = expect_error([&] { other.apply(path, deployment("web", 7), false); });
  EXPECT_TRUE(owned.conflict());
  EXPECT_NE(std::string(owned.what()).find("nibble-controller"), std::string::npos);
  EXPECT_EQ(other.apply(path, deployment("web", 7), true)["spec"]["replicas"], 7);
}

TEST(KubeClient, StatusAndScaleSubresourcesTouchOnlyTheirPart) {
  FakeApiServer server;
  server.start();
  KubeClient client(plain_config(server));
  const std::string path = object_path(kDeployments, "ns", "web");
  client.apply(path, deployment("web", 2));
  // A status patch ignores spec; the object's generation stays.
  const Json patched =
      client.merge_patch(object_path(kDeployments, "ns", "web", "status"),
                         {{"status", {{"readyReplicas", 1}}}, {"spec", {{"replicas", 9}}}});
  EXPECT_EQ(patched["status"]["readyReplicas"], 1);
  EXPECT_EQ(patched["spec"]["replicas"], 2);
  EXPECT_EQ(patched["metadata"]["generation"], 1);

  const std::string scale = object_path(kDeployments, "ns", "web", "scale");
  Json s = client.get(scale);
  EXPECT_EQ(s["kind"], "Scale");
  EXPECT_EQ(s["spec"]["replicas"], 2);
  EXPECT_EQ(s["status"]["selector"], "app=web");
  s["spec"]["replicas"] = 5;
  EXPECT_EQ(client.replace(scale, s)["spec"]["replicas"], 5);
  EXPECT_EQ(client.get(path)["spec"]["replicas"], 5);
  EXPECT_EQ(client.get(path)["status"]["readyReplicas"], 1);  // the scale write kept status
  EXPECT_TRUE(expect_error([&] { client.replace(scale, s); }).conflict());  // stale version
}

TEST(KubeClient, ListWithSelectorAndWatchFromItsVersionWithBookmarks) {
  FakeApiServer server;
  server.set_bookmark_interval(std::chrono::milliseconds(50));
  server.start();
  KubeClient client(plain_config(server));
  const std::string collection = collection_path(kDeployments, "ns");
  client.create(collection, deployment("a", 1));
  client.create(collection, deployment("b", 1));
  const ListResult all = client.list(collection);
  EXPECT_EQ(all.items.size(), 2u);
  const ListResult only_b = client.list(collection, "app=b");
  ASSERT_EQ(only_b.items.size(), 1u);
  EXPECT_EQ(only_b.items[0]["metadata"]["name"], "b");
  EXPECT_EQ(client.list(collection_path(kDeployments, "")).items.size(), 2u);  // all namespaces

  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    client.apply(object_path(kDeployments, "ns", "a"), deployment("a", 3));
    client.remove(object_path(kDeployments, "ns", "b"));
  });
  std::vector<std::string> seen;
  int bookmarks = 0;
  WatchRequest request;
  request.path = collection;
  request.resource_version = all.resource_version;
  request.timeout_seconds = 5;
  client.watch(request, [&](const WatchEvent& e) {
    if (e.type == "BOOKMARK") {
      ++bookmarks;
      EXPECT_FALSE(e.object["metadata"].value("resourceVersion", "").empty());
    } else {
      seen.push_back(e.type + " " + e.object["metadata"].value("name", ""));
    }
    return seen.size() < 2 || bookmarks < 1;
  });
  writer.join();
  EXPECT_EQ(seen, (std::vector<std::string>{"MODIFIED a", "DELETED b"}));
  EXPECT_GE(bookmarks, 1);
}

TEST(KubeClient, WatchErrorsAndCancel) {
  FakeApiServer server;
  server.start();
  KubeClient client(plain_config(server));
  const std::string collection = collection_path(kDeployments, "ns");
  client.create(collection, deployment("a", 1));
  const std::string old_version = client.list(collection).resource_version;
  client.create(collection, deployment("b", 1));
  server.compact();
  WatchRequest request;
  request.path = collection;
  request.resource_version = old_version;
  const KubeError gone =
      expect_error([&] { client.watch(request, [](const WatchEvent&) { return true; }); });
  EXPECT_TRUE(gone.gone());
  EXPECT_EQ(gone.status(), 410);

  // A dropped connection is a transport error (status 0).
  request.resource_version = client.list(collection).resource_version;
  std::thread dropper([&] {
    while (server.open_watches() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    server.drop_watches();
  });
  const KubeError dropped =
      expect_error([&] { client.watch(request, [](const WatchEvent&) { return true; }); });
  dropper.join();
  EXPECT_EQ(dropped.status(), 0);
  EXPECT_TRUE(dropped.transient());

  // Cancel ends a blocked watch and returns normally.
  WatchCancel cancel;
  request.cancel = &cancel;
  std::thread canceller([&] {
    while (server.open_watches() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    cancel.cancel();
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_NO_THROW(client.watch(request, [](const WatchEvent&) { return true; }));
  canceller.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// HTTPS: a CA and a server certificate for 127.0.0.1, a client certificate signed by the CA.
struct Pki {
  nibble::testing::TempDir dir;
  std::string path(const std::string& name) const { return (dir.path() / name).string(); }
  bool make(const std::string& openssl) {
    const std::string d = dir.path().string();
    const std::string cmd =
        "cd '" + d + "' && " + openssl +
        " req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out "
        "ca.pem -days 2 -subj /CN=test-ca"
        " >/dev/null 2>&1 && printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext && " +
        openssl +
        " req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key -out "
        "server.csr -subj /CN=127.0.0.1"
        " >/dev/null 2>&1 && " +
        openssl +
        " x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem"
        " -days 2 -extfile san.ext >/dev/null 2>&1 && " +
        openssl +
        " req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout client.key -out "
        "client.csr -subj /CN=nibble"
        " >/dev/null 2>&1 && " +
        openssl +
        " x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem"
        " -days 2 >/dev/null 2>&1";
    return std::system(cmd.c_str()) == 0;
  }
  std::string read(const std::string& name) const {
    std::ifstream in(path(name));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

TEST(KubeClientTls, VerifiesTheServerAndPresentsAClientCertificate) {
  NIBBLE_REQUIRE_TOOL(openssl, "openssl");
  Pki pki;
  ASSERT_TRUE(pki.make(openssl));
  FakeApiServer server(
      testing::TlsFiles{pki.path("server.pem"), pki.path("server.key"), pki.path("ca.pem")});
  server.start();
  KubeConfig config;
  config.server = server.url();
  config.ca_pem = pki.read("ca.pem");
  config.client_cert_pem = pki.read("client.pem");
  config.client_key_pem = pki.read("client.key");
  KubeClient client(config);
  EXPECT_EQ(client.list(collection_path(kDeployments, "ns")).items.size(), 0u);

  // Without the client certificate the handshake fails: no answer (status 0).
  KubeConfig no_cert = config;
  no_cert.client_cert_pem.clear();
  no_cert.client_key_pem.clear();
  EXPECT_EQ(expect_error([&] { KubeClient(no_cert).list("/api/v1/pods"); }).status(), 0);
  // A CA that did not sign the server certificate is refused.
  KubeConfig wrong_ca = config;
  wrong_ca.ca_pem = pki.read("client.pem");
  EXPECT_EQ(expect_error([&] { KubeClient(wrong_ca).list("/api/v1/pods"); }).status(), 0);
  // Unparsable PEM is a configuration error at construction.
  KubeConfig garbage = config;
  garbage.ca_pem = "not a certificate";
  EXPECT_THROW(KubeClient{garbage}, KubeConfigError);
}

TEST(KubeClientAuth, BearerTokenFileIsReReadWhenRotated) {
  nibble::testing::TempDir dir;
  const std::string token_path = (dir.path() / "token").string();
  { std::ofstream(token_path) << "first\n"; }
  std::vector<std::string> seen;
  std::mutex seen_mutex;
  httplib::Server server;
  server.Get(".*", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(seen_mutex);
    seen.push_back(req.get_header_value("Authorization"));
    res.set_content(R"({"kind":"List","metadata":{"resourceVersion":"1"},"items":[]})",
                    "application/json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread t([&] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  KubeConfig config;
  config.server = "http://127.0.0.1:" + std::to_string(port);
  config.token_file = token_path;
  KubeClient client(config);
  client.list("/api/v1/pods");
  // The kubelet rotates the token by replacing the file; a later mtime makes us re-read it.
  { std::ofstream(token_path) << "second\n"; }
  std::filesystem::last_write_time(
      token_path, std::filesystem::last_write_time(token_path) + std::chrono::seconds(2));
  client.list("/api/v1/pods");
  server.stop();
  t.join();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], "Bearer first");
  EXPECT_EQ(seen[1], "Bearer second");
}

}  // namespace
}  // namespace nibble::kube
