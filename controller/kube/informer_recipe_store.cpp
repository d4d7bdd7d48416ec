#include "controller/kube/informer_recipe_store.h"

#include <algorithm>

#include "controller/kube/resource_path.h"
#include "controller/recipe/recipe_yaml.h"

namespace nibble::kube {

using Json = nlohmann::json;

namespace {

constexpr const char* kWritesRefused =
    "in Kubernetes mode recipes are ModelRecipe objects: write them with kubectl (apply, "
    "edit, delete); the controller only reads them";

std::string resource_version_of(const Json& object) {
  return object["metadata"].value("resourceVersion", "");
}

}  // namespace

std::string recipe_document(const Json& object) {
  const Json& meta = object["metadata"];
  Json doc = {{"apiVersion", object.value("apiVersion", "")},
              {"kind", object.value("kind", "")},
              {"metadata", {{"name", meta.value("name", "")}}},
              {"spec", object.value("spec", Json::object())}};
  if (meta.contains("labels")) doc["metadata"]["labels"] = meta["labels"];
  return doc.dump();
}

InformerRecipeStore::InformerRecipeStore(const Informer& recipes, std::string namespace_name,
                                         std::filesystem::path model_root)
    : recipes_(recipes),
      namespace_(std::move(namespace_name)),
      model_root_(std::move(model_root)) {}

recipe::ParseResult InformerRecipeStore::validate(const std::string& yaml_text) const {
  return store::validate_recipe(yaml_text, model_root_);
}

store::StoredRecipe InformerRecipeStore::stored(const Json& object) const {
  store::StoredRecipe s;
  s.name = object["metadata"].value("name", "");
  s.origin = "ModelRecipe " + key_of(object);
  s.parsed = validate(recipe_document(object));
  s.generation = object["metadata"].value("generation", std::int64_t{1});
  if (s.parsed.ok()) s.spec_hash = store::spec_hash(s.parsed.recipe);
  return s;
}

std::vector<store::StoredRecipe> InformerRecipeStore::load() {
  std::vector<store::StoredRecipe> out;
  std::map<std::string, Parsed> fresh;
  std::lock_guard lock(mutex_);
  for (const Json& object : recipes_.list()) {
    const std::string key = key_of(object);
    const std::string version = resource_version_of(object);
    auto it = parsed_.find(key);
    if (it == parsed_.end() || version.empty() || it->second.resource_version != version) {
      it = parsed_.insert_or_assign(key, Parsed{version, stored(object)}).first;
    }
    out.push_back(it->second.recipe);
    fresh.insert(parsed_.extract(it));
  }
  parsed_ = std::move(fresh);  // deleted objects leave the cache of parses too
  std::sort(out.begin(), out.end(), [](const store::StoredRecipe& a, const store::StoredRecipe& b) {
    return a.name < b.name;
  });
  return out;
}

store::ApplyResult InformerRecipeStore::apply(const std::string&) {
  throw store::WriteRefused(kWritesRefused);
}

std::string InformerRecipeStore::read(const std::string& name) {
  const std::optional<Json> object = recipes_.get(object_key(namespace_, name));
  if (!object) return "";
  const recipe::ParseResult parsed = validate(recipe_document(*object));
  return parsed.ok() ? recipe::to_yaml(parsed.recipe) : object->dump(2) + "\n";
}

bool InformerRecipeStore::remove(const std::string&) {
  throw store::WriteRefused(kWritesRefused);
}

}  // namespace nibble::kube
