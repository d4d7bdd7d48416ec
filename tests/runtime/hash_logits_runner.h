#pragma once
// A ModelRunner for the engine loop's sampling paths without a model: logits that depend only on
// a sequence's tokens so far (no KV cache needed), sharp enough that penalties and filters
// matter, varied enough that draws differ. Its "device" samples with the CPU reference of the
// device pass (kernels/sampling/sampling_ref.h), so host and device sampling must agree exactly.
// It verifies drafts (rows at each of a sequence's last num_logits() positions, drafts included:
// Sequence::token_at) on both paths, and records the device requests of rows after a draft.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/runtime/engine_loop.h"
#include "engine/structured/token_bitmask.h"
#include "kernels/sampling/sampling_ref.h"

namespace nibble::runtime::test_support {

// The runner's logits after the first `end` tokens of `tokens` (vocab floats appended to out).
inline void hash_logits(std::span<const int> tokens, int vocab, std::vector<float>& out) {
  std::uint64_t h = 1469598103934665603ull;
  for (int t : tokens) h = (h ^ std::uint64_t(t)) * 1099511628211ull;
  for (int v = 0; v < vocab; ++v) {
    std::uint64_t z = h + 0x9e3779b97f4a7c15ull * std::uint64_t(v + 1);
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
    out.push_back(float(double(z >> 40) / double(1 << 24) * 6.0 - 3.0));
  }
}

// One device sampling request of a verify row after the first (draft position j >= 1).
struct VerifyRow {
  int draft_position = 0;
  std::vector<int> drafts_before;  // the drafts [0, j)
  std::uint64_t position = 0;      // SamplingRow::position
  std::uint64_t first_position = 0;
  std::vector<kernels::SamplingPenalty> penalties, first_penalties;  // row j's, row 0's
};

class HashLogitsRunner : public ModelRunner {
 public:
  HashLogitsRunner(int vocab, bool device) : vocab_(vocab), device_(device) {}
  int vocab_size() const override { return vocab_; }
  int num_kv_blocks() const override { return 256; }
  int kv_block_size() const override { return 16; }
  bool samples_on_device() const override { return device_; }
  bool verifies_drafts() const override { return true; }

  void execute(const SchedulerOutput& batch, std::vector<float>& logits) override {
    ++host_steps;
    logits.clear();
    for (const ScheduledSequence& s : batch.scheduled)
      for (int j = 0; j < s.num_logits(); ++j) append_row(s, j, logits);
  }

  void execute_sampled(const SchedulerOutput& batch,
                       std::span<const kernels::SamplingRequest> requests) override {
    ++device_steps;
    std::size_t r = 0;
    for (const ScheduledSequence& s : batch.scheduled) {
      const std::size_t first = r;
      for (int j = 0; j < s.num_logits(); ++j) {
        std::vector<float> row;
        append_row(s, j, row);
        const kernels::SamplingRequest& q = requests[r++];
        std::vector<kernels::TopLogprob> top;
        *q.result = kernels::sample_row_reference(row, q.params, q.penalties, q.bitmask, top);
        std::copy(top.begin(), top.end(), q.top.begin());
        if (j == 0) continue;
        const auto& drafts = s.seq->draft_tokens;
        const kernels::SamplingRequest& q0 = requests[first];
        verify_rows.push_back({j,
                               {drafts.begin(), drafts.begin() + j},
                               q.params.position,
                               q0.params.position,
                               {q.penalties.begin(), q.penalties.end()},
                               {q0.penalties.begin(), q0.penalties.end()}});
      }
      if (s.num_draft_tokens > 0) ++verify_steps;
    }
    EXPECT_EQ(r, requests.size());
  }

  // As the CUDA backend orders an overlapped step: the forward (the rows) first, then the host
  // work, then sampling. The masks must still be unwritten (all zeros) when the forward starts.
  void execute_overlapping(const SchedulerOutput& batch, std::vector<float>& logits,
                           const HostWork& host_work) override {
    ++overlapped_steps;
    expect_masks_unwritten(batch);
    execute(batch, logits);
    host_work();
  }
  void execute_sampled_overlapping(const SchedulerOutput& batch,
                                   std::span<const kernels::SamplingRequest> requests,
                                   const HostWork& host_work) override {
    ++overlapped_steps;
    expect_masks_unwritten(batch);
    host_work();
    execute_sampled(batch, requests);
  }

  int host_steps = 0, device_steps = 0, overlapped_steps = 0;
  int verify_steps = 0;  // device steps' sequences with drafts
  std::vector<VerifyRow> verify_rows;

 private:
  static void expect_masks_unwritten(const SchedulerOutput& batch) {
    const structured::TokenBitmaskBatch& m = batch.token_bitmask;
    ASSERT_FALSE(m.empty());
    for (std::size_t r = 0; r < m.constrained.size(); ++r)
      if (m.constrained[r]) {
        EXPECT_EQ(structured::bitmask_count(m.row(r)), 0u);
      }
  }

  // Row j of the sequence's num_logits(): the logits after the step's tokens up to its j-th of
  // the last num_logits() positions.
  void append_row(const ScheduledSequence& s, int j, std::vector<float>& out) const {
    const int end = s.seq->num_computed_tokens + s.num_new_tokens - (s.num_logits() - 1 - j);
    std::vector<int> tokens;
    for (int p = 0; p < end; ++p) tokens.push_back(s.seq->token_at(p));
    hash_logits(tokens, vocab_, out);
  }
  int vocab_;
  bool device_;
};

struct Output {
  std::vector<std::vector<int>> tokens;
  std::vector<std::vector<float>> logprobs;
  std::vector<std::vector<std::vector<TokenLogprob>>> top;
};

// Runs the requests to the end on a fresh engine loop over the runner; each choice's tokens,
// logprobs and top logprobs, requests in order.
inline Output run(ModelRunner& runner, std::vector<GenerationRequest> reqs, EngineConfig c = {}) {
  using namespace std::chrono_literals;
  c.model_name = "hash";
  c.max_model_len = 512;
  c.scheduler = {.max_num_seqs = 16, .max_num_batched_tokens = 64};
  metrics::Registry registry;
  EngineLoop engine(c, runner, registry);
  engine.start();
  std::vector<std::shared_ptr<OutputChannel>> channels;
  std::vector<int> ns;
  for (GenerationRequest& r : reqs) {
    channels.push_back(r.channel);
    ns.push_back(std::max(1, r.params.n));
    EXPECT_EQ(engine.submit(std::move(r)).status, SubmitStatus::kAccepted);
  }
  Output out;
  for (std::size_t i = 0; i < channels.size(); ++i) {
    int finished = 0;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    std::size_t base = out.tokens.size();
    out.tokens.resize(base + std::size_t(ns[i]));
    out.logprobs.resize(base + std::size_t(ns[i]));
    out.top.resize(base + std::size_t(ns[i]));
    while (finished < ns[i] && std::chrono::steady_clock::now() < deadline) {
      for (TokenEvent& e : channels[i]->pop(100ms)) {
        const std::size_t k = base + std::size_t(e.choice);
        if (e.token >= 0) {
          out.tokens[k].push_back(e.token);
          out.logprobs[k].push_back(e.sample.logprob);
          out.top[k].push_back(e.sample.top_logprobs);
        }
        if (e.finish != FinishReason::kNone) ++finished;
      }
    }
  }
  engine.drain_and_stop(1s);
  return out;
}

}  // namespace nibble::runtime::test_support
