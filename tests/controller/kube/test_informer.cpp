// The informer against the API-server double: the cache follows the server across dropped
// watches and 410 Gone (re-list), and every change, including those made while no watch was
// open, reaches the handler.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "controller/kube/informer.h"
#include "controller/kube/resource_path.h"
#include "tests/controller/kube/eventually.h"
#include "tests/controller/kube/fake_api_server.h"

namespace nibble::kube {
namespace {

using Json = nlohmann::json;
using std::chrono::milliseconds;
using testing::eventually;

Json pod(const std::string& name, const std::string& phase) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "ns"}, {"labels", {{"app", "web"}}}}},
          {"status", {{"phase", phase}}}};
}

struct Recorder {
  std::mutex mutex;
  std::vector<std::string> changes;
  void operator()(const ObjectChange& c) {
    std::lock_guard<std::mutex> lock(mutex);
    const char* type = c.type == ChangeType::kAdded      ? "added"
                       : c.type == ChangeType::kModified ? "modified"
                                                         : "deleted";
    changes.push_back(std::string(type) + " " + c.key + " " +
                      c.object["status"].value("phase", ""));
  }
  bool saw(const std::string& change) {
    std::lock_guard<std::mutex> lock(mutex);
    return std::find(changes.begin(), changes.end(), change) != changes.end();
  }
};

class InformerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server.set_bookmark_interval(milliseconds(30));
    server.start();
    config.server = server.url();
    client = std::make_unique<KubeClient>(config);
    options.initial_backoff = milliseconds(10);
    options.max_backoff = milliseconds(40);
    options.label_selector = "app=web";
  }
  void start() {
    informer = std::make_unique<Informer>(*client, collection_path(kPods, "ns"), options,
                                          [this](const ObjectChange& c) { recorder(c); });
    thread = std::thread([this] { informer->run(); });
  }
  void TearDown() override {
    if (informer) informer->stop();
    if (thread.joinable()) thread.join();
  }
  void put(const Json& object) { server.put_object("/api/v1/pods", object); }

  testing::FakeApiServer server;
  KubeConfig config;
  std::unique_ptr<KubeClient> client;
  InformerOptions options;
  Recorder recorder;
  std::unique_ptr<Informer> informer;
  std::thread thread;
};

TEST_F(InformerTest, ListsThenWatchesAndFollowsBookmarks) {
  put(pod("a", "Pending"));
  Json other = pod("x", "Running");
  other["metadata"]["labels"]["app"] = "other";
  put(other);
  start();
  ASSERT_TRUE(eventually([&] { return informer->synced(); }));
  EXPECT_TRUE(recorder.saw("added ns/a Pending"));
  EXPECT_EQ(informer->keys(), std::vector<std::string>{"ns/a"});  // the selector applies
  put(pod("a", "Running"));
  ASSERT_TRUE(eventually([&] { return recorder.saw("modified ns/a Running"); }));
  EXPECT_EQ(informer->get("ns/a")->at("status")["phase"], "Running");
  // Bookmarks move the resourceVersion forward without changes.
  const std::string before = informer->resource_version();
  put(other);  // a change the selector hides: only a bookmark tells us the version moved
  ASSERT_TRUE(eventually(
      [&] { return informer->stats().bookmarks > 0 && informer->resource_version() != before; }));
  EXPECT_EQ(informer->stats().lists, 1);
}

TEST_F(InformerTest, DroppedWatchReconnectsFromItsVersionWithoutLosingChanges) {
  put(pod("a", "Pending"));
  start();
  ASSERT_TRUE(eventually([&] { return informer->synced() && server.open_watches() == 1; }));
  server.fail_next("GET", "/pods", 500, 2);  // the reconnects fail twice first
  server.drop_watches();
  put(pod("a", "Running"));  // while no watch is open
  put(pod("b", "Pending"));
  ASSERT_TRUE(eventually([&] { return recorder.saw("added ns/b Pending"); }));
  EXPECT_TRUE(recorder.saw("modified ns/a Running"));
  const InformerStats stats = informer->stats();
  EXPECT_EQ(stats.lists, 1);     // resumed from the version, no re-list
  EXPECT_GE(stats.failures, 3);  // the drop and the two 500s
  EXPECT_GE(stats.watches, 2);
}

TEST_F(InformerTest, GoneMakesAFullReListThatReportsDeletionsMissedMeanwhile) {
  put(pod("a", "Pending"));
  put(pod("b", "Pending"));
  start();
  ASSERT_TRUE(eventually([&] { return informer->synced() && server.open_watches() == 1; }));
  // Changes the watch misses (dropped, then the history is compacted away): b is deleted and
  // c created while no watch is open; resuming from the old version gets 410 Expired.
  server.fail_next("GET", "/pods", 500, 1000000);  // no watch until the history is gone
  server.drop_watches();
  server.delete_object("/api/v1/pods", "ns", "b");
  put(pod("c", "Running"));
  server.compact();
  server.clear_faults();
  ASSERT_TRUE(
      eventually([&] { return informer->stats().gone >= 1 && informer->stats().lists >= 2; }));
  EXPECT_TRUE(eventually([&] { return recorder.saw("deleted ns/b Pending"); }));
  EXPECT_TRUE(recorder.saw("added ns/c Running"));
  EXPECT_EQ(informer->keys(), (std::vector<std::string>{"ns/a", "ns/c"}));
}

TEST_F(InformerTest, StopEndsAnOpenWatchPromptly) {
  start();
  ASSERT_TRUE(eventually([&] { return server.open_watches() == 1; }));
  const auto begin = std::chrono::steady_clock::now();
  informer->stop();
  thread.join();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, milliseconds(1000));
}

}  // namespace
}  // namespace nibble::kube
