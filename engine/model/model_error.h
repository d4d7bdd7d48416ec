#pragma once
// The model layer's one error type: a checkpoint or config that cannot be used as given.
// Messages name the file and the tensor or field, and say what was expected and what was found.
#include <stdexcept>
#include <string>

namespace nibble::model {

struct ModelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace nibble::model
