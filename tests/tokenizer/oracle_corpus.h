#pragma once
// The committed oracle corpus (tests/oracle/tokenizer/corpus.json) as raw byte strings:
// plain strings, or {"hex": ...} entries that hold invalid UTF-8.
#include <string>
#include <vector>

namespace nibble::tokenizer::testing {

std::string source_dir();  // $NIBBLE_SOURCE_DIR, or the compile-time source dir
std::vector<std::string> load_oracle_corpus();

}  // namespace nibble::tokenizer::testing
