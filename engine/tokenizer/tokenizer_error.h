#pragma once
// The tokenizer layer's one error type: a malformed or unsupported tokenizer.json / config,
// or a bad argument (unknown id). Messages name the file and field, expected vs got.
#include <stdexcept>
#include <string>

namespace nibble::tokenizer {

class TokenizerError : public std::runtime_error {
 public:
  explicit TokenizerError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace nibble::tokenizer
