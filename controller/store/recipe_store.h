#pragma once
// The recipes the reconcile loop runs, behind one interface with two implementations:
//   - RecipeFileStore (recipe_file_store.h): local mode, one YAML file per recipe in the state
//     directory, written by `nibble apply` through the controller's API or by hand;
//   - kube::InformerRecipeStore (controller/kube/informer_recipe_store.h): Kubernetes mode, the
//     ModelRecipes in the recipes informer's cache, written with kubectl.
// The loop (controller/loop) and the controller's API (controller/api) know only this header.
// Implementations are thread-safe: the loop loads while the API's threads validate and apply.
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "controller/recipe/recipe_parse.h"

namespace nibble::store {

struct StoredRecipe {
  std::string name;            // metadata.name, or the file's stem if the file is invalid
  std::string origin;          // where it was read, for messages: a file, or "ModelRecipe ns/name"
  recipe::ParseResult parsed;  // errors when the recipe is invalid
  // Goes up each time the spec changes, as metadata.generation does in Kubernetes (the file
  // store counts only changes of spec_hash; the API server counts every spec change).
  std::int64_t generation = 0;
  std::string spec_hash;  // of what a replica runs with (engine settings and model)
};

// A hash of the fields that change what an engine replica runs: a new value rolls the
// replicas; replica counts and autoscaling do not.
std::string spec_hash(const recipe::ModelRecipe& recipe);

// Parses a recipe and checks it against the controller's rules (the --model-root confinement,
// controller/recipe/model_root.h; an empty root confines nothing). Every store validates so.
recipe::ParseResult validate_recipe(const std::string& yaml_text,
                                    const std::filesystem::path& model_root);

enum class Change { kCreated, kConfigured, kUnchanged };  // as kubectl apply reports them

struct ApplyResult {
  recipe::ParseResult parsed;  // errors when invalid (then nothing was written)
  Change change = Change::kUnchanged;
};

// Thrown by apply() and remove() of a store the controller does not write (Kubernetes mode:
// ModelRecipes are written with kubectl, and the controller's RBAC only reads them).
class WriteRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class RecipeStore {
 public:
  virtual ~RecipeStore() = default;

  // Parses and checks a recipe against this store's rules, as apply() and load() do; writes
  // nothing.
  virtual recipe::ParseResult validate(const std::string& yaml_text) const = 0;
  // Every recipe, valid or not, sorted by name.
  virtual std::vector<StoredRecipe> load() = 0;
  // Validates and stores the recipe with its defaults filled in. Throws WriteRefused.
  virtual ApplyResult apply(const std::string& yaml_text) = 0;
  // The stored recipe as YAML or JSON text ("" when there is no such recipe).
  virtual std::string read(const std::string& name) = 0;
  // False when there is no such recipe. Throws WriteRefused.
  virtual bool remove(const std::string& name) = 0;
};

}  // namespace nibble::store
