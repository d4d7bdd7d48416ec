#pragma once
// Local mode's RecipeStore (recipe_store.h): one YAML file per recipe (recipes/<name>.yaml in
// the state directory), written by `nibble apply` through the controller's API or edited by
// hand; both are picked up on the next pass. A recipe's generation goes up each time its
// spec_hash changes (kept in recipes/.generations.json, so it survives a restart).
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "controller/store/recipe_store.h"

namespace nibble::store {

class RecipeFileStore final : public RecipeStore {
 public:
  // model_root: confines recipes' local model paths (controller/recipe/model_root.h); empty
  // confines nothing.
  explicit RecipeFileStore(std::filesystem::path state_dir, std::filesystem::path model_root = {});

  recipe::ParseResult validate(const std::string& yaml_text) const override;
  std::vector<StoredRecipe> load() override;
  ApplyResult apply(const std::string& yaml_text) override;
  std::string read(const std::string& name) override;
  bool remove(const std::string& name) override;

  std::filesystem::path directory() const { return dir_; }
  // The file holding a recipe (empty when there is none).
  std::filesystem::path file_of(const std::string& name);

 private:
  std::filesystem::path dir_;
  std::filesystem::path model_root_;
  std::mutex mutex_;
  std::map<std::string, std::pair<std::string, std::int64_t>> generations_;  // name -> (hash, gen)
  void save_generations() const;
};

}  // namespace nibble::store
