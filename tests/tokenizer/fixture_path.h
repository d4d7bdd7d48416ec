#pragma once
// Paths of the hand-written tokenizer.json fixtures in tests/tokenizer/fixtures/.
#include <string>

#include "tests/tokenizer/oracle_corpus.h"

namespace nibble::tokenizer::testing {

inline std::string fixture(const std::string& name) {
  return source_dir() + "/tests/tokenizer/fixtures/" + name;
}

}  // namespace nibble::tokenizer::testing
