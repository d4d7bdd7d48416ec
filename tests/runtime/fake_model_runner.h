#pragma once
// A stand-in model for engine-loop tests: the next token is always (last token + 1) mod vocab,
// or, when `script` is set, script[i] for the i-th generated token (its last entry repeats);
// `replies` pick the script by the prompt: the first reply whose `prompt_contains` strings all
// occur in the prompt's bytes (tokens below 256) answers, so a scripted conversation can depend on
// what the chat template rendered. It also keeps a fake KV cache (the token stored in every slot it
// was asked to write) and checks, every step, that each sequence's earlier tokens are where its
// block table says: a scheduler or prefix-cache bug shows up as a wrong slot here. With a sliding
// window it plays a model whose sliding layers keep blocks of their own
// (ModelRunner::kv_sliding_window): the sliding table's blocks share the one fake cache with the
// full table's (so a block given to both groups, or to two sequences, shows up as a wrong slot
// too), the window before each step's first row must be intact, and every block before that window
// must have gone back (kFreedBlock).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/runtime/kv_block_pool.h"
#include "engine/runtime/model_runner.h"

namespace nibble::runtime::testing {

class FakeModelRunner : public ModelRunner {
 public:
  FakeModelRunner(int vocab, int num_blocks, int block_size, int sliding_window = 0)
      : vocab_(vocab),
        num_blocks_(num_blocks),
        block_size_(block_size),
        window_(sliding_window),
        kv_(std::size_t(num_blocks * block_size), -1) {}

  int vocab_size() const override { return vocab_; }
  int num_kv_blocks() const override { return num_blocks_; }
  int kv_block_size() const override { return block_size_; }
  int kv_sliding_window() const override { return window_; }

  void execute(const SchedulerOutput& batch, std::vector<float>& logits) override {
    ++steps;
    if (step_delay.count() > 0) std::this_thread::sleep_for(step_delay);
    if (fail_next) {
      fail_next = false;
      throw std::runtime_error("injected device failure");
    }
    logits.clear();
    for (const ScheduledSequence& s : batch.scheduled) {
      const Sequence& seq = *s.seq;
      const int begin = seq.num_computed_tokens, end = begin + s.num_new_tokens;
      EXPECT_GE(int(seq.block_table.size()) * block_size_, end) << "no room for the new tokens";
      for (int pos = 0; pos < begin; ++pos) {  // earlier KV must be intact
        EXPECT_EQ(kv_[slot(seq, pos)], seq.tokens[std::size_t(pos)])
            << "seq " << seq.id << " pos " << pos;
      }
      for (int pos = begin; pos < end; ++pos) kv_[slot(seq, pos)] = seq.token_at(pos);
      if (window_ > 0) check_window(seq, begin, end);
      if (s.samples_next_token) {
        std::vector<float> row(std::size_t(vocab_), 0.0f);
        int next = (seq.tokens[std::size_t(end - 1)] + 1) % vocab_;
        if (const std::vector<int>& lines = script_for(seq); !lines.empty()) {
          next = lines[std::min(std::size_t(seq.num_output_tokens()), lines.size() - 1)];
        }
        row[std::size_t(next)] = 100.0f;  // certain even at temperature 1
        logits.insert(logits.end(), row.begin(), row.end());
      }
    }
  }

  std::atomic<int> steps{0};
  std::atomic<bool> fail_next{false};
  std::chrono::microseconds step_delay{0};  // makes a step take as long as a real one
  std::vector<int> script;                  // set before the engine starts
  struct Reply {
    std::vector<std::string> prompt_contains;
    std::vector<int> script;
  };
  std::vector<Reply> replies;  // set before the engine starts; tried before `script`

 private:
  const std::vector<int>& script_for(const Sequence& seq) const {
    if (replies.empty()) return script;
    std::string prompt;
    for (int i = 0; i < seq.num_prompt_tokens; ++i) {
      const int t = seq.tokens[std::size_t(i)];
      if (t < 256) prompt.push_back(char(t));
    }
    for (const Reply& r : replies) {
      if (std::all_of(r.prompt_contains.begin(), r.prompt_contains.end(),
                      [&](const std::string& s) { return prompt.find(s) != std::string::npos; }))
        return r.script;
    }
    return script;
  }
  std::size_t slot(const Sequence& seq, int pos) const {
    return std::size_t(seq.block_table[std::size_t(pos / block_size_)] * block_size_ +
                       pos % block_size_);
  }
  std::size_t window_slot(const Sequence& seq, int pos) const {
    return std::size_t(seq.window_block_table[std::size_t(pos / block_size_)] * block_size_ +
                       pos % block_size_);
  }
  // The sliding table of a step computing [begin, end): blocks before the window of `begin`
  // freed, the window's earlier tokens intact, the new ones written.
  void check_window(const Sequence& seq, int begin, int end) {
    ASSERT_GE(int(seq.window_block_table.size()) * block_size_, end) << "no sliding room";
    const int from = std::max(0, begin - window_ + 1);
    for (int b = 0; b < from / block_size_; ++b)
      EXPECT_EQ(seq.window_block_table[std::size_t(b)], kFreedBlock)
          << "seq " << seq.id << " keeps sliding block " << b << " at position " << begin;
    for (int pos = from; pos < begin; ++pos)
      EXPECT_EQ(kv_[window_slot(seq, pos)], seq.tokens[std::size_t(pos)])
          << "seq " << seq.id << " sliding pos " << pos;
    for (int pos = begin; pos < end; ++pos) kv_[window_slot(seq, pos)] = seq.token_at(pos);
  }
  int vocab_, num_blocks_, block_size_, window_;
  std::vector<int> kv_;
};

}  // namespace nibble::runtime::testing
