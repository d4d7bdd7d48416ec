#include "controller/store/recipe_file_store.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "controller/recipe/recipe_yaml.h"

namespace nibble::store {
namespace fs = std::filesystem;

namespace {
std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}
}  // namespace

RecipeFileStore::RecipeFileStore(fs::path state_dir, fs::path model_root)
    : dir_(std::move(state_dir) / "recipes"), model_root_(std::move(model_root)) {
  fs::create_directories(dir_);
  std::ifstream in(dir_ / ".generations.json");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_object()) {
    for (const auto& [name, v] : j.items()) {
      if (v.is_array() && v.size() == 2)
        generations_[name] = {v[0].get<std::string>(), v[1].get<std::int64_t>()};
    }
  }
}

recipe::ParseResult RecipeFileStore::validate(const std::string& yaml_text) const {
  return validate_recipe(yaml_text, model_root_);
}

void RecipeFileStore::save_generations() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, v] : generations_) j[name] = {v.first, v.second};
  const fs::path tmp = dir_ / ".generations.json.tmp";
  std::ofstream(tmp) << j.dump(2) << "\n";
  fs::rename(tmp, dir_ / ".generations.json");
}

std::vector<StoredRecipe> RecipeFileStore::load() {
  std::lock_guard lock(mutex_);
  std::vector<StoredRecipe> out;
  bool changed = false;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    const fs::path& path = entry.path();
    if (path.extension() != ".yaml" && path.extension() != ".yml" && path.extension() != ".json")
      continue;
    if (path.filename().string().starts_with(".")) continue;
    StoredRecipe s;
    s.origin = path.string();
    s.parsed = validate(read_text(path));
    s.name = s.parsed.ok() ? s.parsed.recipe.name : path.stem().string();
    if (s.parsed.ok() && s.name != path.stem().string()) {
      s.parsed.errors.push_back({"metadata.name", "'" + s.name + "' does not match the file name " +
                                                      path.filename().string()});
      s.name = path.stem().string();
    }
    if (s.parsed.ok()) {
      s.spec_hash = spec_hash(s.parsed.recipe);
      auto& [hash, generation] = generations_[s.name];
      if (hash != s.spec_hash) {
        hash = s.spec_hash;
        ++generation;
        changed = true;
      }
      s.generation = generation;
    } else {
      s.generation = generations_.count(s.name) ? generations_[s.name].second : 0;
    }
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(),
            [](const StoredRecipe& a, const StoredRecipe& b) { return a.name < b.name; });
  if (changed) save_generations();
  return out;
}

ApplyResult RecipeFileStore::apply(const std::string& yaml_text) {
  ApplyResult result{validate(yaml_text), Change::kUnchanged};
  if (!result.parsed.ok()) return result;
  std::lock_guard lock(mutex_);
  const fs::path path = dir_ / (result.parsed.recipe.name + ".yaml"), tmp = path.string() + ".tmp";
  const std::string text = recipe::to_yaml(result.parsed.recipe);
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    result.change = Change::kCreated;
  } else if (read_text(path) != text) {
    result.change = Change::kConfigured;
  } else {
    return result;
  }
  std::ofstream(tmp) << text;
  fs::rename(tmp, path);  // atomic: the controller never reads half a recipe
  return result;
}

fs::path RecipeFileStore::file_of(const std::string& name) {
  if (!recipe::is_dns1123_label(name)) return {};
  std::lock_guard lock(mutex_);
  for (const char* ext : {".yaml", ".yml", ".json"}) {
    std::error_code ec;
    if (fs::exists(dir_ / (name + ext), ec)) return dir_ / (name + ext);
  }
  return {};
}

std::string RecipeFileStore::read(const std::string& name) {
  const fs::path file = file_of(name);
  if (file.empty()) return "";
  std::lock_guard lock(mutex_);
  return read_text(file);
}

bool RecipeFileStore::remove(const std::string& name) {
  if (!recipe::is_dns1123_label(name)) return false;
  std::lock_guard lock(mutex_);
  std::error_code ec;
  bool removed = false;
  for (const char* ext : {".yaml", ".yml", ".json"}) removed |= fs::remove(dir_ / (name + ext), ec);
  return removed;
}

}  // namespace nibble::store
