#pragma once
// Kubernetes mode's RecipeStore (controller/store/recipe_store.h): the ModelRecipes of one
// namespace as the recipes informer caches them, so the reconcile loop reads the cluster's
// objects directly (watch → informer cache → loop → replica backend), with no copy on disk.
// A recipe's generation is its metadata.generation, which the API server bumps on every spec
// change; each object is parsed once per resourceVersion.
// Writes are refused (store::WriteRefused): in a cluster, ModelRecipes are written with
// kubectl, and the controller's RBAC only lists and watches them.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <mutex>
#include <string>

#include "controller/kube/informer.h"
#include "controller/store/recipe_store.h"

namespace nibble::kube {

class InformerRecipeStore final : public store::RecipeStore {
 public:
  // recipes: the informer on the namespace's ModelRecipes (it must outlive the store).
  // model_root: as the file store's (controller/recipe/model_root.h); empty confines nothing.
  InformerRecipeStore(const Informer& recipes, std::string namespace_name,
                      std::filesystem::path model_root = {});

  recipe::ParseResult validate(const std::string& yaml_text) const override;
  std::vector<store::StoredRecipe> load() override;
  store::ApplyResult apply(const std::string& yaml_text) override;  // throws WriteRefused
  // The recipe with its defaults as YAML; an invalid one as the object's JSON.
  std::string read(const std::string& name) override;
  bool remove(const std::string& name) override;  // throws WriteRefused

 private:
  store::StoredRecipe stored(const nlohmann::json& object) const;

  const Informer& recipes_;
  std::string namespace_;
  std::filesystem::path model_root_;
  struct Parsed {
    std::string resource_version;
    store::StoredRecipe recipe;
  };
  std::mutex mutex_;
  std::map<std::string, Parsed> parsed_;  // by object key
};

// A ModelRecipe object as the recipe parser reads it: apiVersion, kind, spec and the metadata
// a user writes (name, labels), as JSON text (JSON is YAML).
std::string recipe_document(const nlohmann::json& object);

}  // namespace nibble::kube
