#pragma once
// Prompt lookup (vLLM's "ngram" method): the last n tokens of the sequence, for n from max_n down
// to min_n, are searched for earlier in the sequence; at the first (earliest) occurrence of the
// longest n that occurs, the tokens that followed it are proposed. Needs no weights; it pays off
// where the output repeats the context (code editing, extraction, RAG).
#include "engine/spec/drafter.h"

namespace nibble::spec {

class NgramDrafter : public Drafter {
 public:
  NgramDrafter(int min_n, int max_n);  // 1 <= min_n <= max_n
  std::string_view name() const override { return "ngram"; }
  void propose(std::span<const int> tokens, int max_tokens, std::vector<int>& draft) const override;

 private:
  int min_n_, max_n_;
};

}  // namespace nibble::spec
