#pragma once
// What apply refuses beyond each recipe's own validity, judged against the recipes a store
// already holds (as an API server's admission runs after validation):
//   - a served name (spec.model.servedName, default metadata.name) that another recipe
//     serves: two recipes would answer for one model name (409 Conflict);
//   - a new recipe beyond the controller's --max-recipes: each one costs the controller memory
//     and its loop a pass, so their number is bounded (403 Forbidden, as an exceeded
//     Kubernetes ResourceQuota answers). Updates of recipes already stored are always admitted.
// Pure: the caller serializes admission and the writes that follow.
#include <cstddef>
#include <string>
#include <vector>

#include "controller/recipe/recipe_parse.h"
#include "controller/store/recipe_store.h"

namespace nibble::store {

constexpr std::size_t kDefaultMaxRecipes = 1000;

struct AdmissionError {
  enum class Kind { kServedNameTaken, kTooManyRecipes };
  Kind kind;
  std::size_t document = 0;  // in `incoming`, 0-based
  std::string name;          // the refused recipe
  std::string field;         // "spec.model.servedName", or "" for the count
  std::string message;
  int http_status() const { return kind == Kind::kServedNameTaken ? 409 : 403; }
};

// `incoming`: the documents of one apply, each already valid (invalid ones are skipped), and
// without names given twice (recipe::duplicate_names).
std::vector<AdmissionError> admission_errors(const std::vector<StoredRecipe>& stored,
                                             const std::vector<recipe::ParseResult>& incoming,
                                             std::size_t max_recipes);

}  // namespace nibble::store
