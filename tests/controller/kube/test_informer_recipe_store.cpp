// Kubernetes mode's recipe store over the ModelRecipe informer, against the API-server double:
// load() follows adds, spec updates and deletes from the watch (and a re-list after 410 Gone),
// with the API server's generations; invalid objects are loaded with their errors; writes are
// refused, since in a cluster kubectl writes ModelRecipes.
#include <gtest/gtest.h>

#include <thread>

#include "controller/kube/informer.h"
#include "controller/kube/informer_recipe_store.h"
#include "controller/kube/resource_path.h"
#include "tests/controller/kube/eventually.h"
#include "tests/controller/kube/fake_api_server.h"

namespace nibble::kube {
namespace {

using Json = nlohmann::json;
using std::chrono::milliseconds;
using testing::eventually;

constexpr const char* kRecipesPath = "/apis/nibble.dev/v1alpha1/modelrecipes";

Json recipe(const std::string& name, int max_num_seqs) {
  return {
      {"apiVersion", "nibble.dev/v1alpha1"},
      {"kind", "ModelRecipe"},
      {"metadata", {{"name", name}, {"namespace", "ns"}}},
      {"spec",
       {{"model", {{"source", "/models/" + name}}}, {"engine", {{"maxNumSeqs", max_num_seqs}}}}}};
}

class InformerRecipeStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server.set_bookmark_interval(milliseconds(30));
    server.start();
    client = std::make_unique<KubeClient>(KubeConfig{server.url()});
    InformerOptions options;
    options.initial_backoff = milliseconds(10);
    options.max_backoff = milliseconds(40);
    informer = std::make_unique<Informer>(*client, collection_path(kModelRecipes, "ns"), options,
                                          [](const ObjectChange&) {});
    store = std::make_unique<InformerRecipeStore>(*informer, "ns");
  }
  void run() {
    thread = std::thread([this] { informer->run(); });
    ASSERT_TRUE(eventually([&] { return informer->synced(); }));
  }
  void TearDown() override {
    informer->stop();
    if (thread.joinable()) thread.join();
  }
  // The loaded recipe `name`, or nothing.
  std::optional<store::StoredRecipe> loaded(const std::string& name) {
    for (store::StoredRecipe& s : store->load())
      if (s.name == name) return s;
    return std::nullopt;
  }
  void patch(const std::string& name, const Json& spec) {
    client->merge_patch(object_path(kModelRecipes, "ns", name), {{"spec", spec}});
  }

  testing::FakeApiServer server;
  std::unique_ptr<KubeClient> client;
  std::unique_ptr<Informer> informer;
  std::unique_ptr<InformerRecipeStore> store;
  std::thread thread;
};

TEST_F(InformerRecipeStoreTest, LoadFollowsAddsUpdatesAndDeletesFromTheWatch) {
  server.put_object(kRecipesPath, recipe("listed", 8));
  run();
  // From the list.
  ASSERT_EQ(store->load().size(), 1u);
  const store::StoredRecipe listed = *loaded("listed");
  EXPECT_TRUE(listed.parsed.ok()) << listed.parsed.error_text();
  EXPECT_EQ(listed.parsed.recipe.engine.max_num_seqs, 8);
  EXPECT_EQ(listed.generation, 1);
  EXPECT_EQ(listed.origin, "ModelRecipe ns/listed");
  EXPECT_EQ(listed.spec_hash, store::spec_hash(listed.parsed.recipe));

  // Added while watching; sorted by name.
  server.put_object(kRecipesPath, recipe("added", 16));
  ASSERT_TRUE(eventually([&] { return loaded("added").has_value(); }));
  const std::vector<store::StoredRecipe> both = store->load();
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].name, "added");
  EXPECT_EQ(both[1].name, "listed");

  // A spec update: the API server's next generation, a new spec hash.
  patch("listed", {{"engine", {{"maxNumSeqs", 32}}}});
  ASSERT_TRUE(eventually([&] { return loaded("listed")->generation == 2; }));
  EXPECT_EQ(loaded("listed")->parsed.recipe.engine.max_num_seqs, 32);
  EXPECT_NE(loaded("listed")->spec_hash, listed.spec_hash);
  // A replica count changes the generation, not what a replica runs.
  patch("listed", {{"replicas", {{"min", 1}, {"max", 3}}}});
  ASSERT_TRUE(eventually([&] { return loaded("listed")->generation == 3; }));
  EXPECT_EQ(loaded("listed")->parsed.recipe.replicas.max, 3);
  EXPECT_EQ(loaded("listed")->spec_hash, store::spec_hash(loaded("listed")->parsed.recipe));
  EXPECT_NE(store->read("listed").find("maxNumSeqs: 32"), std::string::npos)
      << store->read("listed");

  // Deleted.
  server.delete_object(kRecipesPath, "ns", "added");
  ASSERT_TRUE(eventually([&] { return !loaded("added").has_value(); }));
  EXPECT_EQ(store->load().size(), 1u);
  EXPECT_EQ(store->read("added"), "");
}

TEST_F(InformerRecipeStoreTest, ChangesMadeWhileNoWatchWasOpenArriveByTheRelist) {
  server.put_object(kRecipesPath, recipe("a", 8));
  run();
  ASSERT_TRUE(loaded("a").has_value());
  server.fail_next("GET", "/modelrecipes", 500, 1000000);
  server.drop_watches();
  server.put_object(kRecipesPath, recipe("b", 8));
  server.delete_object(kRecipesPath, "ns", "a");
  server.compact();  // the resumed watch gets 410 Gone: a re-list
  std::this_thread::sleep_for(milliseconds(50));
  server.clear_faults();
  ASSERT_TRUE(eventually([&] { return !loaded("a") && loaded("b"); }));
}

TEST_F(InformerRecipeStoreTest, InvalidObjectsLoadWithTheirErrorsAndModelRootApplies) {
  const std::filesystem::path root = "/srv/models";
  store = std::make_unique<InformerRecipeStore>(*informer, "ns", root);
  Json typo = recipe("typo", 8);
  typo["spec"]["replicaz"] = 3;  // passed by a CRD without a schema, refused here
  server.put_object(kRecipesPath, typo);
  server.put_object(kRecipesPath, recipe("outside", 8));  // /models/outside
  Json inside = recipe("inside", 8);
  inside["spec"]["model"]["source"] = "/srv/models/inside";
  server.put_object(kRecipesPath, inside);
  run();
  ASSERT_EQ(store->load().size(), 3u);
  EXPECT_NE(loaded("typo")->parsed.error_text().find("spec.replicaz"), std::string::npos)
      << loaded("typo")->parsed.error_text();
  EXPECT_NE(loaded("outside")->parsed.error_text().find("--model-root"), std::string::npos)
      << loaded("outside")->parsed.error_text();
  EXPECT_TRUE(loaded("inside")->parsed.ok()) << loaded("inside")->parsed.error_text();
  EXPECT_EQ(loaded("typo")->spec_hash, "");
  // An invalid recipe reads back as the object, so `nibble get` shows what is wrong.
  EXPECT_NE(store->read("typo").find("replicaz"), std::string::npos);
}

TEST_F(InformerRecipeStoreTest, WritesAreRefusedWithAMessageNamingKubectl) {
  run();
  const std::string yaml =
      "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata: {name: x}\n"
      "spec: {model: {source: /models/x}}\n";
  EXPECT_TRUE(store->validate(yaml).ok());
  try {
    store->apply(yaml);
    FAIL() << "apply was not refused";
  } catch (const store::WriteRefused& e) {
    EXPECT_NE(std::string(e.what()).find("kubectl"), std::string::npos) << e.what();
  }
  EXPECT_THROW(store->remove("x"), store::WriteRefused);
  EXPECT_EQ(server.count_requests("POST", "/modelrecipes") +
                server.count_requests("PATCH", "/modelrecipes") +
                server.count_requests("DELETE", "/modelrecipes"),
            0);
}

}  // namespace
}  // namespace nibble::kube
