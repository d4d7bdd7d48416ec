#pragma once
// Recipes applied together (the documents of one `nibble apply`, the -f files of
// nibble-controller) are checked as a set as well as one by one: a name given twice would have
// one document silently replace the other, so the whole set is refused instead.
#include <cstddef>
#include <string>
#include <vector>

#include "controller/recipe/recipe_parse.h"

namespace nibble::recipe {

struct DuplicateName {
  std::size_t document = 0;        // the later document, 0-based
  std::size_t first_document = 0;  // the one that used the name first
  std::string name;
  std::string message() const;  // "'x' is also the name of document 1 (counting from 1); ..."
};

// Documents whose metadata.name an earlier document of the set already has. Documents
// without a name (invalid ones) are left to their own errors.
std::vector<DuplicateName> duplicate_names(const std::vector<ParseResult>& documents);

}  // namespace nibble::recipe
