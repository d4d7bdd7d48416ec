#pragma once
// What the engine loop needs of a constrained sequence: which tokens may come next, and the
// state moving on by the sampled token. One object per sequence (per choice of a request),
// used by one thread at a time (the engine thread, or one of its mask workers for fill_mask);
// made by a factory the request carries. Constraints of one grammar may fill masks at once.
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace nibble::structured {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Writes the allowed next tokens into `mask` (bitmask_words(vocab) words, see
  // token_bitmask.h). End-of-sequence tokens are allowed only where the output is complete.
  virtual void fill_mask(std::span<std::uint32_t> mask) = 0;
  // Moves on by `token`; false if the token was not allowed (the state is then unchanged).
  virtual bool advance(int token) = 0;
  // The output so far is a whole sentence of the grammar.
  virtual bool is_complete() const = 0;
};

class TokenConstraintFactory {
 public:
  virtual ~TokenConstraintFactory() = default;
  virtual std::unique_ptr<TokenConstraint> start() const = 0;
  virtual std::size_t mask_words() const = 0;
  // For metrics and logs: json_schema, json_object, regex, choice, tool_call.
  virtual const std::string& kind() const = 0;
};

}  // namespace nibble::structured
