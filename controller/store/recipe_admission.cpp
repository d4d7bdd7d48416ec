#include "controller/store/recipe_admission.h"

#include <map>
#include <set>

namespace nibble::store {

std::vector<AdmissionError> admission_errors(const std::vector<StoredRecipe>& stored,
                                             const std::vector<recipe::ParseResult>& incoming,
                                             std::size_t max_recipes) {
  std::set<std::string> applied;
  for (const recipe::ParseResult& p : incoming)
    if (p.ok()) applied.insert(p.recipe.name);

  // Served names held by stored recipes that this apply does not replace; an invalid stored
  // recipe serves nothing.
  std::map<std::string, std::string> served_by;  // served name -> recipe
  std::set<std::string> names;
  for (const StoredRecipe& s : stored) {
    names.insert(s.name);
    if (s.parsed.ok() && applied.count(s.name) == 0)
      served_by.emplace(s.parsed.recipe.served_name, s.name);
  }

  std::vector<AdmissionError> errors;
  for (std::size_t i = 0; i < incoming.size(); ++i) {
    if (!incoming[i].ok()) continue;
    const recipe::ModelRecipe& r = incoming[i].recipe;
    const auto [other, inserted] = served_by.emplace(r.served_name, r.name);
    if (!inserted && other->second != r.name) {
      errors.push_back({AdmissionError::Kind::kServedNameTaken, i, r.name, "spec.model.servedName",
                        "'" + r.served_name + "' is already served by recipe '" + other->second +
                            "'; give this recipe another servedName or delete '" + other->second +
                            "' first"});
    }
  }

  std::size_t total = names.size();
  for (const std::string& name : applied) total += names.count(name) == 0;
  if (total > max_recipes) {
    for (std::size_t i = 0; i < incoming.size(); ++i) {
      if (!incoming[i].ok() || names.count(incoming[i].recipe.name) != 0) continue;
      errors.push_back({AdmissionError::Kind::kTooManyRecipes, i, incoming[i].recipe.name, "",
                        "the controller holds " + std::to_string(names.size()) +
                            " recipes and this apply adds " + std::to_string(total - names.size()) +
                            ", beyond its limit of " + std::to_string(max_recipes) +
                            " (nibble-controller --max-recipes); delete recipes or raise the "
                            "limit"});
    }
  }
  return errors;
}

}  // namespace nibble::store
