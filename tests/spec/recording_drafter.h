#pragma once
// A drafter for the hidden-state methods' tests (mtp, eagle3): passes everything to a
// HiddenStateDrafter and keeps what the engine handed it (the tokens, their start and their hidden
// states), so that a test can check them against the target's own forward passes.
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "engine/spec/drafter.h"
#include "engine/spec/hidden_state_drafter.h"

namespace nibble::runtime::testing {

class RecordingDrafter : public spec::Drafter {
 public:
  struct Observed {
    std::vector<int> tokens;
    int start;
    std::vector<float> hidden;
  };
  explicit RecordingDrafter(std::shared_ptr<spec::HiddenStateDrafter> inner)
      : inner_(std::move(inner)) {}
  std::string_view name() const override { return "recording"; }
  bool reads_hidden_states() const override { return true; }
  void observe(std::int64_t sequence, std::span<const int> tokens, int start,
               std::span<const float> hidden) const override {
    {
      std::lock_guard lock(mutex_);
      observed_.push_back({{tokens.begin(), tokens.end()}, start, {hidden.begin(), hidden.end()}});
    }
    inner_->observe(sequence, tokens, start, hidden);
  }
  void forget(std::int64_t sequence) const override { inner_->forget(sequence); }
  void propose_for(std::int64_t sequence, std::span<const int> tokens, int max_tokens,
                   std::vector<int>& draft) const override {
    inner_->propose_for(sequence, tokens, max_tokens, draft);
  }
  void propose(std::span<const int> tokens, int max_tokens,
               std::vector<int>& draft) const override {
    inner_->propose(tokens, max_tokens, draft);
  }
  std::vector<Observed> observed() const {
    std::lock_guard lock(mutex_);
    return observed_;
  }

 private:
  std::shared_ptr<spec::HiddenStateDrafter> inner_;
  mutable std::mutex mutex_;
  mutable std::vector<Observed> observed_;
};

}  // namespace nibble::runtime::testing
