#include "engine/structured/compiled_grammar.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/structured/token_bitmask.h"

namespace nibble::structured {
namespace {

// One sequence's position in the grammar.
class GrammarConstraint : public TokenConstraint {
 public:
  explicit GrammarConstraint(std::shared_ptr<const CompiledGrammar> grammar)
      : grammar_(std::move(grammar)), state_(grammar_->initial_state()) {}

  void fill_mask(std::span<std::uint32_t> mask) override {
    const auto cached = grammar_->mask(state_);
    std::copy_n(cached->begin(), std::min(mask.size(), cached->size()), mask.begin());
  }

  bool advance(int token) override {
    const TokenVocabulary& vocab = grammar_->vocabulary();
    if (token < 0 || std::size_t(token) >= vocab.size()) return false;
    if (vocab.is_eos(token)) return state_.accepting();
    const auto& bytes = vocab.bytes(token);
    if (!bytes) return false;
    MatchState next = grammar_->matcher().advance(state_, *bytes);
    if (next.dead()) return false;
    state_ = std::move(next);
    return true;
  }

  bool is_complete() const override { return state_.accepting(); }

 private:
  std::shared_ptr<const CompiledGrammar> grammar_;
  MatchState state_;
};

}  // namespace

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocabulary,
                                 std::string kind, std::size_t max_cached_states)
    : grammar_(std::move(grammar)),
      matcher_(grammar_),
      vocabulary_(std::move(vocabulary)),
      kind_(std::move(kind)),
      words_(bitmask_words(vocabulary_->size())),
      max_cached_states_(max_cached_states),
      initial_(matcher_.initial()) {
  mask(initial_);
}

std::unique_ptr<TokenConstraint> CompiledGrammar::start() const {
  return std::make_unique<GrammarConstraint>(shared_from_this());
}

std::size_t CompiledGrammar::cached_states() const {
  std::lock_guard lock(mutex_);
  return cache_.size();
}

std::shared_ptr<const std::vector<std::uint32_t>> CompiledGrammar::mask(
    const MatchState& state) const {
  {
    std::lock_guard lock(mutex_);
    if (auto it = cache_.find(state); it != cache_.end()) return it->second;
  }
  auto computed = std::make_shared<const std::vector<std::uint32_t>>(compute_mask(state));
  std::lock_guard lock(mutex_);
  if (cache_.size() >= max_cached_states_) {
    // Rare (huge grammars or long-running servers): start over rather than track recency.
    spdlog::debug("structured output: mask cache of {} states full, cleared", cache_.size());
    cache_.clear();
  }
  cache_.emplace(state, computed);
  return computed;
}

std::vector<std::uint32_t> CompiledGrammar::compute_mask(const MatchState& state) const {
  std::vector<std::uint32_t> mask(words_, 0);
  if (state.accepting()) {
    for (int eos : vocabulary_->eos_ids()) {
      if (eos >= 0 && std::size_t(eos) < vocabulary_->size()) bitmask_allow(mask, std::size_t(eos));
    }
  }
  const std::vector<int>& ids = vocabulary_->sorted_ids();
  const std::vector<std::uint16_t>& lcp = vocabulary_->common_prefix();
  // states[d]: the state after the first d bytes of the current token; valid up to `valid`.
  std::vector<MatchState> states(1, state);
  std::size_t valid = 0;
  std::size_t i = 0;
  while (i < ids.size()) {
    const std::string& bytes = *vocabulary_->bytes(ids[i]);
    std::size_t depth = std::min<std::size_t>(lcp[i], valid);
    if (states.size() < bytes.size() + 1) states.resize(bytes.size() + 1);
    bool rejected = false;
    for (; depth < bytes.size(); ++depth) {
      matcher_.advance(states[depth], (unsigned char)bytes[depth], states[depth + 1]);
      if (states[depth + 1].dead()) {
        rejected = true;
        break;
      }
    }
    if (!rejected) {
      bitmask_allow(mask, std::size_t(ids[i]));
      valid = bytes.size();
      ++i;
      continue;
    }
    // Every following token that shares the rejected prefix (depth + 1 bytes) is rejected too.
    valid = depth;
    ++i;
    while (i < ids.size() && lcp[i] > depth) ++i;
  }
  return mask;
}

}  // namespace nibble::structured
