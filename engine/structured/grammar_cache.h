#pragma once
// Compiled grammars by OutputSpec, least recently used evicted, shared by every request and
// thread. Compiling happens on the caller's (HTTP) thread, outside the lock, and includes the
// initial state's mask, so a new schema never stalls the engine thread on its first token.
#include <chrono>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "engine/structured/compiled_grammar.h"
#include "engine/structured/output_spec.h"

namespace nibble::structured {

struct StructuredOptions {
  JsonGrammarOptions json;
  std::size_t max_cached_grammars = 64;
  std::size_t max_cached_states = 4096;  // token masks kept per grammar
};

class GrammarCache {
 public:
  GrammarCache(std::shared_ptr<const TokenVocabulary> vocabulary, StructuredOptions options);

  struct Result {
    std::shared_ptr<const CompiledGrammar> grammar;
    bool cached = false;
    double compile_seconds = 0;  // 0 when cached
  };
  // Throws StructuredError for a spec that cannot be compiled.
  Result get(const OutputSpec& spec);

  const TokenVocabulary& vocabulary() const { return *vocabulary_; }

 private:
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  StructuredOptions options_;
  std::mutex mutex_;
  std::list<std::pair<std::string, std::shared_ptr<const CompiledGrammar>>> lru_;  // front: newest
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
};

}  // namespace nibble::structured
