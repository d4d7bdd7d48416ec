#pragma once
// Recipes in the state directory: one YAML file per recipe (recipes/<name>.yaml), written by
// `nibble apply` through the controller's API or edited by hand; both are picked up on the next
// pass. A recipe's generation goes up each time its spec changes (kept in
// recipes/.generations.json), as metadata.generation does in Kubernetes.
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "controller/recipe/recipe_parse.h"

namespace nibble::store {

struct StoredRecipe {
  std::string name;  // metadata.name, or the file's stem if the file is invalid
  std::filesystem::path file;
  recipe::ParseResult parsed;  // errors when the file is invalid
  std::int64_t generation = 0;
  std::string spec_hash;  // of what a replica runs with (engine settings and model)
};

// A hash of the fields that change what an engine replica runs: a new value rolls the
// replicas; replica counts and autoscaling do not.
std::string spec_hash(const recipe::ModelRecipe& recipe);

// Thread-safe: the controller's pass loads while its API threads apply and remove.
enum class Change { kCreated, kConfigured, kUnchanged };  // as kubectl apply reports them

struct ApplyResult {
  recipe::ParseResult parsed;  // errors when invalid (then nothing was written)
  Change change = Change::kUnchanged;
};

class RecipeStore {
 public:
  // model_root: confines recipes' local model paths (controller/recipe/model_root.h); empty
  // confines nothing.
  explicit RecipeStore(std::filesystem::path state_dir, std::filesystem::path model_root = {});

  // Parses and checks a recipe against this store's rules (the model root), as apply() and
  // load() do; writes nothing.
  recipe::ParseResult validate(const std::string& yaml_text) const;
  std::vector<StoredRecipe> load();
  // Validates and stores the recipe with its defaults filled in.
  ApplyResult apply(const std::string& yaml_text);
  // The stored file's text ("" when there is no such recipe).
  std::string read(const std::string& name);
  // False when there is no such recipe.
  bool remove(const std::string& name);
  std::filesystem::path directory() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::filesystem::path model_root_;
  std::mutex mutex_;
  std::map<std::string, std::pair<std::string, std::int64_t>> generations_;  // name -> (hash, gen)
  void save_generations() const;
};

}  // namespace nibble::store
