#include "controller/daemon/recipe_files.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "controller/recipe/recipe_set.h"
#include "controller/recipe/recipe_yaml.h"
#include "controller/recipe/relative_model_path.h"
#include "controller/recipe/yaml_documents.h"
#include "controller/store/recipe_admission.h"

namespace nibble::controller {
namespace fs = std::filesystem;

namespace {

struct FileDocument {
  std::string file;
  std::string text;
};

// Warns when the stored recipe was written after `file` was last modified (an apply since)
// and the file's spec differs: the restart silently reverted that apply before.
void warn_if_reverting(store::RecipeFileStore& store, const recipe::ModelRecipe& recipe,
                       const std::string& file) {
  const fs::path stored = store.file_of(recipe.name);
  std::error_code ec1, ec2;
  const auto stored_at = fs::last_write_time(stored, ec1);
  const auto file_at = fs::last_write_time(file, ec2);
  if (stored.empty() || ec1 || ec2 || stored_at <= file_at) return;
  if (store.read(recipe.name) == recipe::to_yaml(recipe)) return;  // as the store writes it
  spdlog::warn(
      "-f {}: modelrecipe {} was changed (nibble apply) after {} was last modified; the "
      "file's spec replaces that change (-f files win at start-up: edit the file, or start "
      "without -f to keep applied changes)",
      file, recipe.name, file);
}

}  // namespace

bool apply_recipe_files(const std::vector<std::string>& files, store::RecipeFileStore& store,
                        std::size_t max_recipes) {
  std::vector<FileDocument> docs;
  std::vector<recipe::ParseResult> parsed_docs;
  bool ok = true;
  std::error_code ec;
  const fs::path here = fs::current_path(ec);
  for (const std::string& file : files) {
    std::ifstream in(file);
    if (!in) {
      spdlog::error("cannot read recipe file {}", file);
      ok = false;
      continue;
    }
    std::stringstream text;
    text << in.rdbuf();
    const std::string resolved = recipe::with_absolute_model_paths(text.str(), here);
    for (std::string& doc : recipe::split_yaml_documents(resolved)) {
      const recipe::ParseResult parsed = store.validate(doc);
      if (!parsed.ok()) {
        spdlog::error("{}: invalid ModelRecipe:\n{}", file, parsed.error_text());
        ok = false;
      }
      parsed_docs.push_back(parsed);
      docs.push_back({file, std::move(doc)});
    }
  }
  for (const recipe::DuplicateName& d : recipe::duplicate_names(parsed_docs)) {
    spdlog::error("-f files: metadata.name: {}", d.message());
    ok = false;
  }
  if (!ok) return false;
  for (const store::AdmissionError& e :
       store::admission_errors(store.load(), parsed_docs, max_recipes)) {
    spdlog::error("{}: modelrecipe {} refused: {}{}", docs[e.document].file, e.name,
                  e.field.empty() ? "" : e.field + ": ", e.message);
    ok = false;
  }
  if (!ok) return false;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    warn_if_reverting(store, parsed_docs[i].recipe, docs[i].file);
    const store::ApplyResult r = store.apply(docs[i].text);
    spdlog::info("modelrecipe {} {}", r.parsed.recipe.name,
                 r.change == store::Change::kCreated      ? "created"
                 : r.change == store::Change::kConfigured ? "configured"
                                                          : "unchanged");
  }
  return true;
}

}  // namespace nibble::controller
