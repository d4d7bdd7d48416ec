// Hybrid models' recurrent-state slots (engine/runtime/state_slot_pool.h): the pool itself, the
// scheduler taking a slot at admission and giving it back at preemption and finish, and the
// engine loop running such a model with prefix caching off, and speculating where the runner
// verifies drafts.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>

#include "engine/runtime/engine_loop.h"
#include "engine/runtime/scheduler.h"
#include "engine/runtime/state_slot_pool.h"
#include "engine/spec/ngram_drafter.h"
#include "tests/runtime/fake_model_runner.h"
#include "tests/runtime/test_sequences.h"

namespace nibble::runtime {
namespace {

using namespace std::chrono_literals;

TEST(StateSlotPool, HandsOutEachSlotOnceAndTakesItBack) {
  StateSlotPool pool(3);
  Sequence a, b, c, d;
  pool.allocate(a);
  pool.allocate(b);
  pool.allocate(c);
  EXPECT_EQ(std::set<int>({a.state_slot, b.state_slot, c.state_slot}), std::set<int>({0, 1, 2}));
  EXPECT_FALSE(pool.can_allocate());
  EXPECT_DOUBLE_EQ(pool.usage(), 1.0);
  EXPECT_THROW(pool.allocate(d), std::logic_error);  // none free
  const int freed = b.state_slot;
  pool.free(b);
  EXPECT_EQ(b.state_slot, -1);
  pool.free(b);  // holding none: nothing happens
  EXPECT_EQ(pool.num_free(), 1);
  pool.allocate(d);
  EXPECT_EQ(d.state_slot, freed);
  EXPECT_THROW(pool.allocate(d), std::logic_error);  // already holds one
  EXPECT_THROW(StateSlotPool(0), std::invalid_argument);
}

// Runs one step sampling token 7 and finishes sequences at max_tokens.
SchedulerOutput step(Scheduler& scheduler) {
  SchedulerOutput out = scheduler.schedule();
  scheduler.complete_step(out, std::vector<int>(out.scheduled.size(), 7));
  for (const auto& s : out.scheduled)
    if (s.seq->status == SequenceStatus::kRunning &&
        s.seq->num_output_tokens() >= s.seq->params.max_tokens)
      scheduler.finish(*s.seq);
  return out;
}

TEST(SchedulerStateSlots, AdmissionWaitsForAFreeSlot) {
  KvBlockPool blocks(64, 16, false);
  StateSlotPool slots(2);
  Scheduler scheduler({.max_num_seqs = 8, .max_num_batched_tokens = 1000}, blocks, &slots);
  auto a = make_seq(1, 5, 3), b = make_seq(2, 5, 3), c = make_seq(3, 5, 3);
  for (auto* s : {a.get(), b.get(), c.get()}) scheduler.add(*s);
  SchedulerOutput out = step(scheduler);
  ASSERT_EQ(out.scheduled.size(), 2u);  // two slots: the third sequence waits
  EXPECT_EQ(c->status, SequenceStatus::kWaiting);
  EXPECT_EQ(c->state_slot, -1);
  while (!scheduler.idle()) step(scheduler);
  EXPECT_EQ(c->num_output_tokens(), 3);
  for (auto* s : {a.get(), b.get(), c.get()}) EXPECT_EQ(s->state_slot, -1);  // all given back
  EXPECT_EQ(slots.num_free(), 2);
}

TEST(SchedulerStateSlots, PreemptionGivesTheSlotBack) {
  // As Scheduler.PreemptsTheNewestWhenTheCacheIsFullAndRecomputesIt: b is preempted at step 3.
  KvBlockPool blocks(4, 4, false);
  StateSlotPool slots(8);
  Scheduler scheduler({.max_num_seqs = 8, .max_num_batched_tokens = 64}, blocks, &slots);
  auto a = make_seq(1, 7, 6), b = make_seq(2, 7, 6, 100);
  scheduler.add(*a);
  scheduler.add(*b);
  step(scheduler);
  step(scheduler);
  SchedulerOutput s3 = step(scheduler);
  ASSERT_EQ(s3.preempted.size(), 1u);
  EXPECT_EQ(b->state_slot, -1);  // recomputed from position 0 later, with a fresh state
  EXPECT_EQ(b->num_computed_tokens, 0);
  EXPECT_GE(a->state_slot, 0);
  EXPECT_EQ(slots.num_free(), 7);
  while (!scheduler.idle()) step(scheduler);
  EXPECT_EQ(slots.num_free(), 8);
}

// Random sequences through a small cache and fewer slots than max_num_seqs: every running
// sequence holds a slot no other running sequence holds, waiting ones hold none, and every slot
// comes back.
TEST(SchedulerStateSlots, RandomWorkloadNeverSharesOrLeaksASlot) {
  std::mt19937 rng(4321);
  KvBlockPool blocks(40, 16, false);
  StateSlotPool slots(6);
  Scheduler scheduler({.max_num_seqs = 12, .max_num_batched_tokens = 96}, blocks, &slots);
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int i = 0; i < 60; ++i) {
    seqs.push_back(make_seq(i, 1 + int(rng() % 150), 1 + int(rng() % 40), i * 1000));
    scheduler.add(*seqs.back());
  }
  for (int steps = 0; !scheduler.idle() && steps < 100000; ++steps) {
    step(scheduler);
    std::set<int> held;
    for (const auto& s : seqs) {
      if (s->status == SequenceStatus::kRunning) {
        ASSERT_GE(s->state_slot, 0);
        ASSERT_LT(s->state_slot, 6);
        EXPECT_TRUE(held.insert(s->state_slot).second) << "slot " << s->state_slot << " shared";
      } else {
        EXPECT_EQ(s->state_slot, -1) << "sequence " << s->id;
      }
    }
    EXPECT_EQ(int(held.size()) + slots.num_free(), 6);
  }
  EXPECT_TRUE(scheduler.idle());
  EXPECT_GT(scheduler.num_preemptions(), 0u);
  EXPECT_EQ(slots.num_free(), 6);
}

// A fake hybrid model: checks each step that every scheduled sequence holds its own slot and
// that a sequence never starts past position 0 (no prefix-cache hit: there is no state for it).
class FakeHybridRunner : public testing::FakeModelRunner {
 public:
  FakeHybridRunner(int vocab, int num_blocks, int block_size, int slots)
      : FakeModelRunner(vocab, num_blocks, block_size), slots_(slots) {}
  int num_state_slots() const override { return slots_; }
  void execute(const SchedulerOutput& batch, std::vector<float>& logits) override {
    std::set<int> held;
    for (const ScheduledSequence& s : batch.scheduled) {
      EXPECT_GE(s.seq->state_slot, 0);
      EXPECT_LT(s.seq->state_slot, slots_);
      EXPECT_TRUE(held.insert(s.seq->state_slot).second);
      if (!started_.contains(s.seq->id)) {
        started_[s.seq->id] = true;
        EXPECT_EQ(s.seq->num_computed_tokens, 0) << "sequence " << s.seq->id;
      }
    }
    FakeModelRunner::execute(batch, logits);
  }

 private:
  int slots_;
  std::map<std::int64_t, bool> started_;
};

EngineConfig hybrid_config() {
  EngineConfig c;
  c.model_name = "fake-hybrid";
  c.max_model_len = 512;
  c.scheduler = {.max_num_seqs = 4, .max_num_batched_tokens = 64};
  c.enable_prefix_caching = true;  // asked for, turned off for the hybrid model
  return c;
}

TEST(EngineLoopStateSlots, IdenticalPromptsAreComputedFromTheStartEachTime) {
  FakeHybridRunner runner(32, 64, 4, 4);
  metrics::Registry registry;
  EngineLoop engine(hybrid_config(), runner, registry);
  engine.start();
  const std::vector<int> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // three full blocks
  for (const char* id : {"first", "second", "third"}) {
    auto r = greedy_request(id, prompt, 3);
    r.params.ignore_eos = true;
    auto channel = r.channel;
    ASSERT_EQ(engine.submit(std::move(r)).status, SubmitStatus::kAccepted);
    int finished = 0;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (finished == 0 && std::chrono::steady_clock::now() < deadline)
      for (const TokenEvent& e : channel->pop(100ms)) finished += e.finish != FinishReason::kNone;
    ASSERT_EQ(finished, 1) << id;
  }
  engine.drain_and_stop(1s);
}

// The value of one series in a Prometheus text exposition, -1 when absent.
double series_value(const std::string& text, const std::string& series) {
  const std::size_t at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
}

// nibble_state_slots_used follows the running sequences: the runner reads it at each step (as
// the last step left it), it peaks at the three running together and falls back to 0.
TEST(EngineLoopStateSlots, ExportsTheSlotsInUse) {
  metrics::Registry registry;
  const std::string used = "nibble_state_slots_used{model_name=\"fake-hybrid\"}";
  class ReadingRunner : public FakeHybridRunner {
   public:
    ReadingRunner(metrics::Registry& r, std::string series)
        : FakeHybridRunner(32, 64, 4, 4), registry_(r), series_(std::move(series)) {}
    void execute(const SchedulerOutput& batch, std::vector<float>& logits) override {
      peak = std::max(peak, series_value(registry_.render(), series_));
      FakeHybridRunner::execute(batch, logits);
    }
    double peak = -1;

   private:
    metrics::Registry& registry_;
    std::string series_;
  } runner(registry, used);
  EngineLoop engine(hybrid_config(), runner, registry);
  EXPECT_EQ(series_value(registry.render(), "nibble_state_slots{model_name=\"fake-hybrid\"}"), 4);
  std::vector<std::shared_ptr<OutputChannel>> channels;
  for (const char* id : {"a", "b", "c"}) {
    auto r = greedy_request(id, {1, 2, 3}, 12);
    r.params.ignore_eos = true;
    channels.push_back(r.channel);
    ASSERT_EQ(engine.submit(std::move(r)).status, SubmitStatus::kAccepted);
  }
  engine.start();  // all three admitted in the first step
  int finished = 0;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (finished < 3 && std::chrono::steady_clock::now() < deadline)
    for (auto& channel : channels)
      for (const TokenEvent& e : channel->pop(10ms)) finished += e.finish != FinishReason::kNone;
  engine.drain_and_stop(1s);
  ASSERT_EQ(finished, 3);
  EXPECT_EQ(runner.peak, 3);
  EXPECT_EQ(series_value(registry.render(), used), 0);
  // A model without recurrent state exports no such series.
  metrics::Registry plain_registry;
  testing::FakeModelRunner plain(32, 64, 4);
  EngineConfig c = hybrid_config();
  c.model_name = "plain";
  EngineLoop plain_engine(c, plain, plain_registry);
  EXPECT_EQ(plain_registry.render().find("nibble_state_slots"), std::string::npos);
}

TEST(EngineLoopStateSlots, RefusesTooFewSlots) {
  metrics::Registry registry;
  FakeHybridRunner few(32, 64, 4, 3);  // max_num_seqs is 4
  EXPECT_THROW(EngineLoop(hybrid_config(), few, registry), std::invalid_argument);
}

// A hybrid model speculates where its runner verifies drafts: the backend rolls the state slot
// back past rejected drafts (tests/spec/test_spec_hybrid.cpp runs it end to end). A runner that
// cannot verify is refused for that, as for any model, not for the recurrent state.
TEST(EngineLoopStateSlots, SpeculatesWhereTheRunnerVerifiesDrafts) {
  class VerifyingHybridRunner : public FakeHybridRunner {
   public:
    using FakeHybridRunner::FakeHybridRunner;
    bool verifies_drafts() const override { return true; }
  };
  EngineConfig c = hybrid_config();
  c.drafter = std::make_shared<spec::NgramDrafter>(1, 3);
  c.num_speculative_tokens = 2;
  metrics::Registry registry, registry2;
  VerifyingHybridRunner verifying(32, 64, 4, 4);
  EXPECT_NO_THROW(EngineLoop(c, verifying, registry));
  FakeHybridRunner plain(32, 64, 4, 4);
  try {
    EngineLoop engine(c, plain, registry2);
    FAIL() << "a runner that cannot verify drafts was given a drafter";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("logits at several positions"), std::string::npos)
        << e.what();
    EXPECT_EQ(std::string(e.what()).find("recurrent state"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nibble::runtime
