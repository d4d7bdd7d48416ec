#pragma once
// The error of engine/structured/: a schema, regex or choice list that cannot be turned into
// a grammar. `keyword` names what was refused (a JSON Schema keyword, a regex construct) so
// that the server can answer 400 with a message the client can act on.
#include <stdexcept>
#include <string>

namespace nibble::structured {

class StructuredError : public std::runtime_error {
 public:
  StructuredError(const std::string& message, std::string keyword = {})
      : std::runtime_error(message), keyword_(std::move(keyword)) {}
  const std::string& keyword() const { return keyword_; }

 private:
  std::string keyword_;
};

}  // namespace nibble::structured
