#include "controller/recipe/recipe_set.h"

#include <map>

namespace nibble::recipe {

std::string DuplicateName::message() const {
  return "'" + name + "' is also the name of document " + std::to_string(first_document + 1) +
         " (counting from 1); a recipe may appear only once in what is applied together";
}

std::vector<DuplicateName> duplicate_names(const std::vector<ParseResult>& documents) {
  std::vector<DuplicateName> out;
  std::map<std::string, std::size_t> first;
  for (std::size_t i = 0; i < documents.size(); ++i) {
    const std::string& name = documents[i].recipe.name;
    if (name.empty()) continue;
    const auto [it, inserted] = first.emplace(name, i);
    if (!inserted) out.push_back({i, it->second, name});
  }
  return out;
}

}  // namespace nibble::recipe
