#include "engine/structured/grammar_cache.h"

#include <spdlog/spdlog.h>

namespace nibble::structured {

GrammarCache::GrammarCache(std::shared_ptr<const TokenVocabulary> vocabulary,
                           StructuredOptions options)
    : vocabulary_(std::move(vocabulary)), options_(options) {}

GrammarCache::Result GrammarCache::get(const OutputSpec& spec) {
  const std::string key = spec.cache_key();
  {
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return {it->second->second, true, 0};
    }
  }
  const auto start = std::chrono::steady_clock::now();
  auto grammar = std::make_shared<const CompiledGrammar>(build_grammar(spec, options_.json),
                                                         vocabulary_, output_kind_name(spec.kind),
                                                         options_.max_cached_states);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("structured output: compiled a {} grammar ({} rules, {} elements) in {:.1f} ms",
               grammar->kind(), grammar->grammar().rule_alternatives.size(),
               grammar->grammar().elements.size(), seconds * 1e3);
  std::lock_guard lock(mutex_);
  if (auto it = index_.find(key); it != index_.end()) {  // another thread compiled it meanwhile
    return {it->second->second, true, seconds};
  }
  lru_.emplace_front(key, grammar);
  index_[key] = lru_.begin();
  while (lru_.size() > options_.max_cached_grammars) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return {grammar, false, seconds};
}

}  // namespace nibble::structured
