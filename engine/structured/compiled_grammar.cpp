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

enum class Step { kAlive, kDead, kAbort };

// Sets the bit of every token the trie walk reaches from `root` without `step` rejecting a
// byte. step(from, byte, to) writes the state after `byte`; kAbort stops the walk (false).
// whole_subtree(parent, node): every token under `node` is allowed from its parent's state
// (then the subtree is taken in one go, without stepping through it).
template <class State, class StepFn, class WholeFn>
bool walk_trie(const TokenVocabulary& vocab, const State& root, StepFn step, WholeFn whole_subtree,
               std::vector<std::uint32_t>& mask) {
  const std::vector<TrieNode>& trie = vocab.trie();
  const std::vector<int>& tokens = vocab.trie_tokens();
  // states[d]: the state after the first d bytes of the current node's prefix.
  std::vector<State> states(vocab.max_token_bytes() + 1);
  states[0] = root;
  const std::size_t end = trie.size() - 1;  // the last node is a sentinel
  std::size_t k = 0;
  while (k < end) {
    const TrieNode& node = trie[k];
    if (whole_subtree(states[node.depth], node)) {
      for (std::uint32_t t = node.tokens_begin; t < trie[node.subtree_end].tokens_begin; ++t) {
        bitmask_allow(mask, std::size_t(tokens[t]));
      }
      k = node.subtree_end;
      continue;
    }
    switch (step(states[node.depth], node.byte, states[node.depth + 1u])) {
      case Step::kDead:
        k = node.subtree_end;
        continue;
      case Step::kAbort:
        return false;
      case Step::kAlive:
        break;
    }
    for (std::uint32_t t = node.tokens_begin; t < trie[k + 1].tokens_begin; ++t) {
      bitmask_allow(mask, std::size_t(tokens[t]));
    }
    ++k;
  }
  return true;
}

void allow_eos(const TokenVocabulary& vocab, std::vector<std::uint32_t>& mask) {
  for (int eos : vocab.eos_ids()) {
    if (eos >= 0 && std::size_t(eos) < vocab.size()) bitmask_allow(mask, std::size_t(eos));
  }
}

}  // namespace

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocabulary,
                                 std::string kind, std::size_t max_cached_states)
    : grammar_(std::move(grammar)),
      matcher_(grammar_),
      vocabulary_(std::move(vocabulary)),
      kind_(std::move(kind)),
      words_(bitmask_words(vocabulary_->size())),
      max_cached_states_(std::max<std::size_t>(max_cached_states, 1)),
      initial_(matcher_.initial()),
      // Transitions are 1 KiB per state: 4 states per cached mask keeps them a fifth of the
      // masks' memory at a 150k vocabulary.
      automaton_(matcher_, 4 * max_cached_states_) {
  mask(initial_);
}

std::unique_ptr<TokenConstraint> CompiledGrammar::start() const {
  return std::make_unique<GrammarConstraint>(shared_from_this());
}

std::size_t CompiledGrammar::cached_states() const {
  std::lock_guard lock(mutex_);
  return num_masks_;
}

std::size_t CompiledGrammar::automaton_states() const {
  std::lock_guard lock(mutex_);
  return automaton_.size();
}

CompiledGrammar::Mask CompiledGrammar::mask(const MatchState& state) const {
  std::lock_guard lock(mutex_);
  GrammarAutomaton::StateId id = automaton_.intern(state);
  if (id == GrammarAutomaton::kFull) {
    // Rare (huge grammars or long-running servers): start over rather than track recency.
    spdlog::debug("structured output: automaton of {} states full, cleared", automaton_.size());
    automaton_.clear();
    masks_.clear();
    num_masks_ = 0;
    id = automaton_.intern(state);
  }
  if (id < 0) return walk_matcher(state);  // dead (no token allowed) or still no room
  if (std::size_t(id) < masks_.size() && masks_[std::size_t(id)]) return masks_[std::size_t(id)];
  Mask computed = walk_automaton(id);
  if (!computed) {
    spdlog::debug("structured output: automaton full during a mask walk, cleared");
    automaton_.clear();
    masks_.clear();
    num_masks_ = 0;
    return walk_matcher(state);
  }
  if (num_masks_ >= max_cached_states_) {
    masks_.clear();
    num_masks_ = 0;
  }
  if (masks_.size() <= std::size_t(id)) masks_.resize(std::size_t(id) + 1);
  masks_[std::size_t(id)] = computed;
  ++num_masks_;
  return computed;
}

CompiledGrammar::Mask CompiledGrammar::walk_automaton(GrammarAutomaton::StateId root) const {
  std::vector<std::uint32_t> bits(words_, 0);
  if (automaton_.accepting(root)) allow_eos(*vocabulary_, bits);
  const bool complete = walk_trie(
      *vocabulary_, root,
      [this](GrammarAutomaton::StateId from, unsigned char byte, GrammarAutomaton::StateId& to) {
        to = automaton_.next(from, byte);
        if (to == GrammarAutomaton::kDead) return Step::kDead;
        return to == GrammarAutomaton::kFull ? Step::kAbort : Step::kAlive;
      },
      [this](GrammarAutomaton::StateId parent, const TrieNode& node) {
        const auto& classes = token_byte_classes();
        for (int c = 0; c < kNumTokenByteClasses; ++c) {
          const int height = node.class_height[std::size_t(c)];
          if (height > 0 && automaton_.survives(parent, c, classes[std::size_t(c)], height)) {
            return true;
          }
        }
        return false;
      },
      bits);
  if (!complete) return nullptr;
  return std::make_shared<const std::vector<std::uint32_t>>(std::move(bits));
}

CompiledGrammar::Mask CompiledGrammar::walk_matcher(const MatchState& root) const {
  std::vector<std::uint32_t> bits(words_, 0);
  if (root.accepting()) allow_eos(*vocabulary_, bits);
  walk_trie(
      *vocabulary_, root,
      [this](const MatchState& from, unsigned char byte, MatchState& to) {
        matcher_.advance(from, byte, to);
        return to.dead() ? Step::kDead : Step::kAlive;
      },
      [](const MatchState&, const TrieNode&) { return false; }, bits);
  return std::make_shared<const std::vector<std::uint32_t>>(std::move(bits));
}

}  // namespace nibble::structured
