#pragma once
// Sequences and requests the runtime tests build: a prompt of consecutive token ids and a token
// budget, greedy.
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "engine/runtime/engine_loop.h"
#include "engine/runtime/sequence.h"

namespace nibble::runtime {

inline std::unique_ptr<Sequence> make_seq(std::int64_t id, int prompt_len, int max_tokens,
                                          int first = 0) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->tokens.resize(std::size_t(prompt_len));
  std::iota(s->tokens.begin(), s->tokens.end(), first);
  s->num_prompt_tokens = prompt_len;
  s->params.max_tokens = max_tokens;
  return s;
}

inline GenerationRequest greedy_request(std::string id, std::vector<int> prompt, int max_tokens) {
  GenerationRequest r;
  r.id = std::move(id);
  r.prompt = std::move(prompt);
  r.params.max_tokens = max_tokens;
  r.params.temperature = 0;
  r.channel = std::make_shared<OutputChannel>();
  return r;
}

}  // namespace nibble::runtime
