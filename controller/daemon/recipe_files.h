#pragma once
// nibble-controller -f FILE: recipe files applied to the state directory at every start-up.
// Every recipe of every file is validated and admitted (served names, --max-recipes:
// controller/store/recipe_admission.h) before any is stored; relative model paths are made
// absolute against the controller's working directory, where the files were named.
// The files win: a recipe changed with `nibble apply` since the file was last modified is
// replaced by the file's spec, with a warning naming both.
#include <cstddef>
#include <string>
#include <vector>

#include "controller/store/recipe_file_store.h"

namespace nibble::controller {

// False (every problem logged) when any file cannot be read or any recipe is refused; then
// nothing was stored.
bool apply_recipe_files(const std::vector<std::string>& files, store::RecipeFileStore& store,
                        std::size_t max_recipes);

}  // namespace nibble::controller
