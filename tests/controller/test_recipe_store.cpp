// The recipe store: apply results as kubectl reports them, generations that count spec changes
// only, hand-edited and invalid files, deletion.
#include <gtest/gtest.h>

#include <fstream>

#include "controller/recipe/yaml_documents.h"
#include "controller/store/recipe_file_store.h"
#include "tests/support/temp_dir.h"

namespace nibble::store {
namespace {

std::string recipe_yaml(const std::string& name, int max_seqs, int max_replicas = 1) {
  return "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata:\n  name: " + name +
         "\nspec:\n  model:\n    source: /models/" + name +
         "\n  engine:\n    maxNumSeqs: " + std::to_string(max_seqs) +
         "\n  replicas: {min: 1, max: " + std::to_string(max_replicas) + "}\n";
}

const StoredRecipe* find(const std::vector<StoredRecipe>& all, const std::string& name) {
  for (const auto& s : all)
    if (s.name == name) return &s;
  return nullptr;
}

TEST(RecipeStore, ApplyReportsCreatedConfiguredUnchanged) {
  nibble::testing::TempDir dir;
  RecipeFileStore store(dir.path());
  EXPECT_EQ(store.apply(recipe_yaml("a", 8)).change, Change::kCreated);
  EXPECT_EQ(store.apply(recipe_yaml("a", 8)).change, Change::kUnchanged);
  EXPECT_EQ(store.apply(recipe_yaml("a", 16)).change, Change::kConfigured);
  const ApplyResult bad = store.apply("apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\n");
  EXPECT_FALSE(bad.parsed.ok());
  EXPECT_NE(store.read("a").find("maxNumSeqs: 16"), std::string::npos);
  EXPECT_EQ(store.read("missing"), "");
  EXPECT_EQ(store.read("../etc"), "");
}

TEST(RecipeStore, GenerationCountsSpecChangesNotReplicaCounts) {
  nibble::testing::TempDir dir;
  {
    RecipeFileStore store(dir.path());
    store.apply(recipe_yaml("a", 8));
    auto all = store.load();
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0].generation, 1);
    const std::string first_hash = all[0].spec_hash;
    EXPECT_EQ(store.load()[0].generation, 1);  // loading again changes nothing

    store.apply(recipe_yaml("a", 8, 3));  // replica bounds: no new engines needed
    all = store.load();
    EXPECT_EQ(all[0].generation, 1);
    EXPECT_EQ(all[0].spec_hash, first_hash);

    store.apply(recipe_yaml("a", 32));  // engine settings: a roll
    all = store.load();
    EXPECT_EQ(all[0].generation, 2);
    EXPECT_NE(all[0].spec_hash, first_hash);
  }
  RecipeFileStore reopened(dir.path());  // generations survive a controller restart
  EXPECT_EQ(reopened.load()[0].generation, 2);
}

TEST(RecipeStore, HandEditedAndInvalidFiles) {
  nibble::testing::TempDir dir;
  RecipeFileStore store(dir.path());
  store.apply(recipe_yaml("good", 8));
  std::ofstream(store.directory() / "typo.yaml") << recipe_yaml("typo", 8) << "  replicaz: 3\n";
  std::ofstream(store.directory() / "wrong-name.yaml") << recipe_yaml("other", 8);
  std::ofstream(store.directory() / "garbage.yml") << "{{{: [\n";
  std::ofstream(store.directory() / "notes.txt") << "ignored";
  const auto all = store.load();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_TRUE(find(all, "good")->parsed.ok());
  ASSERT_NE(find(all, "typo"), nullptr);
  EXPECT_NE(find(all, "typo")->parsed.error_text().find("spec.replicaz"), std::string::npos)
      << find(all, "typo")->parsed.error_text();
  ASSERT_NE(find(all, "wrong-name"), nullptr);
  EXPECT_NE(find(all, "wrong-name")->parsed.error_text().find("does not match the file name"),
            std::string::npos);
  ASSERT_NE(find(all, "garbage"), nullptr);
  EXPECT_FALSE(find(all, "garbage")->parsed.ok());
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end(),
                             [](const auto& a, const auto& b) { return a.name < b.name; }));
}

TEST(RecipeStore, Remove) {
  nibble::testing::TempDir dir;
  RecipeFileStore store(dir.path());
  store.apply(recipe_yaml("a", 8));
  EXPECT_TRUE(store.remove("a"));
  EXPECT_FALSE(store.remove("a"));
  EXPECT_FALSE(store.remove("../../x"));
  EXPECT_TRUE(store.load().empty());
}

TEST(YamlDocuments, SplitsOnSeparatorsAndDropsEmptyDocuments) {
  const auto docs = recipe::split_yaml_documents(
      "# leading comment\n---\na: 1\n--- # second\nb: 2\n---\n\n# only a comment\n...\nc: 3\n");
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0], "a: 1\n");
  EXPECT_EQ(docs[1], "b: 2\n");
  EXPECT_EQ(docs[2], "c: 3\n");
  EXPECT_TRUE(recipe::split_yaml_documents("\n# nothing\n---\n").empty());
  // "----" or "---x" are content, not separators.
  EXPECT_EQ(recipe::split_yaml_documents("a: |\n  ---x\n").size(), 1u);
}

}  // namespace
}  // namespace nibble::store

namespace nibble::store {
namespace {

TEST(RecipeStore, ModelRootRefusesAppliedAndHandWrittenRecipesOutsideIt) {
  nibble::testing::TempDir dir;
  const std::filesystem::path root = dir.path() / "models";
  std::filesystem::create_directories(root);
  RecipeFileStore store(dir.path(), root);
  const std::string inside =
      "apiVersion: nibble.dev/v1alpha1\nkind: ModelRecipe\nmetadata: {name: in}\n"
      "spec: {model: {source: " +
      (root / "m").string() + "}}\n";
  EXPECT_EQ(store.apply(inside).change, Change::kCreated);
  const ApplyResult out = store.apply(recipe_yaml("out", 8));  // source /models/out
  ASSERT_EQ(out.parsed.errors.size(), 1u);
  EXPECT_EQ(out.parsed.errors[0].field, "spec.model.source");
  EXPECT_NE(out.parsed.errors[0].message.find("outside the controller's --model-root"),
            std::string::npos);
  EXPECT_EQ(store.read("out"), "");
  EXPECT_FALSE(store.validate(recipe_yaml("out", 8)).ok());
  // Written by hand into the state directory: loaded, but invalid with the same error.
  std::ofstream(store.directory() / "hand.yaml") << recipe_yaml("hand", 8);
  const auto all = store.load();
  ASSERT_NE(find(all, "hand"), nullptr);
  EXPECT_FALSE(find(all, "hand")->parsed.ok());
  EXPECT_TRUE(find(all, "in")->parsed.ok());
}

}  // namespace
}  // namespace nibble::store
