#include "tests/spec/spec_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "engine/backend/backend_model_runner.h"
#include "engine/runtime/engine_loop.h"
#include "engine/spec/ngram_drafter.h"
#include "engine/spec/reference_drafter.h"

namespace nibble::runtime::testing {

using namespace std::chrono_literals;
using spec::ReferenceDrafter;

namespace {

// The runner with its sliding window reported as longer than any sequence: the block pool then
// keeps both tables whole, freeing nothing (EngineShape::free_window_blocks false).
class KeepWindowBlocks : public ModelRunner {
 public:
  explicit KeepWindowBlocks(ModelRunner& runner) : r_(runner) {}
  int vocab_size() const override { return r_.vocab_size(); }
  int num_kv_blocks() const override { return r_.num_kv_blocks(); }
  int kv_block_size() const override { return r_.kv_block_size(); }
  int num_state_slots() const override { return r_.num_state_slots(); }
  int kv_sliding_window() const override { return r_.kv_sliding_window() > 0 ? 1 << 24 : 0; }
  void execute(const SchedulerOutput& batch, std::vector<float>& logits) override {
    r_.execute(batch, logits);
  }
  bool verifies_drafts() const override { return r_.verifies_drafts(); }

 private:
  ModelRunner& r_;
};

}  // namespace

model::ModelConfig tiny_llama_config(int layers, int vocab) {
  model::ModelConfig c;
  c.arch = model::Arch::Llama;
  c.vocab_size = vocab;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = layers;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = c.max_context = 256;
  c.rope.theta = 10000.0;
  return c;
}

SpecRun run_engine(const SpecTarget& target, const std::vector<Request>& requests,
                   std::shared_ptr<const spec::Drafter> drafter, int k, const EngineShape& shape) {
  backend::BackendModelRunner backend_runner(*target.backend, shape.num_blocks, shape.block_size,
                                             target.state_slots);
  KeepWindowBlocks keeping(backend_runner);
  ModelRunner& runner =
      shape.free_window_blocks ? static_cast<ModelRunner&>(backend_runner) : keeping;
  metrics::Registry registry;
  EngineConfig config;
  config.model_name = shape.model_name;
  config.max_model_len = shape.max_model_len;
  config.enable_prefix_caching = shape.enable_prefix_caching;
  config.scheduler = {.max_num_seqs = shape.max_num_seqs,
                      .max_num_batched_tokens = shape.max_num_batched_tokens};
  config.drafter = std::move(drafter);
  config.num_speculative_tokens = k;
  EngineLoop engine(config, runner, registry);
  SpecRun run;
  std::vector<std::shared_ptr<OutputChannel>> channels;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    GenerationRequest r;
    r.id = "r" + std::to_string(i);
    r.prompt = requests[i].prompt;
    r.params = requests[i].params;
    r.channel = std::make_shared<OutputChannel>();
    channels.push_back(r.channel);
    EXPECT_EQ(engine.submit(std::move(r)).status, SubmitStatus::kAccepted);
    run.outcomes.emplace_back(std::size_t(std::max(1, requests[i].params.n)));
  }
  // Started once every request waits in its inbox: the first step sees them all, so the runs a
  // test compares split prompts into the same prefill chunks whatever the machine's load (a
  // hybrid model's chunked linear attention rounds by chunk, docs/models.md).
  engine.start();
  std::size_t unfinished = 0;
  for (const auto& o : run.outcomes) unfinished += o.size();
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (unfinished > 0 && std::chrono::steady_clock::now() < deadline) {
    for (std::size_t i = 0; i < channels.size(); ++i) {
      for (TokenEvent& e : channels[i]->pop(1ms)) {
        Outcome& o = run.outcomes[i][std::size_t(e.choice)];
        if (e.token >= 0) {
          o.tokens.push_back(e.token);
          o.samples.push_back(std::move(e.sample));
        }
        if (e.finish != FinishReason::kNone) {
          o.finish = e.finish;
          --unfinished;
        }
      }
    }
  }
  EXPECT_EQ(unfinished, 0u) << "requests did not finish in time";
  engine.drain_and_stop(5s);
  run.metrics = registry.render();
  return run;
}

SpecRun generate(const SpecTarget& target, const std::vector<Request>& requests,
                 std::shared_ptr<const spec::Drafter> drafter, int k) {
  return run_engine(target, requests, std::move(drafter), k, EngineShape{});
}

// The value of one series in a Prometheus text exposition, 0 when absent.
double metric(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line))
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return 0;
}

double spec_metric(const std::string& text, const std::string& name,
                   const std::string& model_name) {
  return metric(text, "nibble_spec_decode_" + name + "_total{model_name=\"" + model_name + "\"}");
}

std::vector<int> repeating_prompt(std::mt19937& gen, int length, int vocab) {
  std::uniform_int_distribution<int> token(0, vocab - 1);
  std::vector<int> phrase(6);
  for (int& t : phrase) t = token(gen);
  std::vector<int> prompt;
  for (int i = 0; i < length; ++i)
    prompt.push_back(i % 9 == 8 ? token(gen) : phrase[std::size_t(i) % phrase.size()]);
  return prompt;
}

// Mixed prompt lengths (3..40) and max_tokens (1..30), logprobs on a third of the requests.
std::vector<Request> mixed_greedy_requests(int batch) {
  std::mt19937 gen(42);
  std::vector<Request> requests;
  for (int i = 0; i < batch; ++i) {
    Request r;
    r.prompt = repeating_prompt(gen, 3 + (i * 7) % 38);
    r.params.temperature = 0;
    r.params.max_tokens = 1 + (i * 11 + 6) % 30;
    r.params.logprobs = i % 3 == 0 ? 2 : -1;
    requests.push_back(r);
  }
  return requests;
}

std::vector<Request> seeded_sampled_requests(int batch, std::uint64_t first_seed) {
  std::vector<Request> requests = mixed_greedy_requests(batch);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    SamplingParams& p = requests[i].params;
    p.temperature = 0.8f;
    p.top_p = 0.9f;
    p.top_k = i % 2 == 0 ? 8 : 0;
    p.repetition_penalty = 1.1f;
    p.presence_penalty = 0.3f;
    p.frequency_penalty = 0.2f;
    p.seed = first_seed + i;
    p.n = 2;
  }
  return requests;
}

// Each request's prompt followed by its greedy continuation of 40 tokens, without speculation.
std::vector<std::vector<int>> greedy_references(const SpecTarget& target,
                                                std::vector<Request> requests) {
  for (Request& r : requests) {
    r.params.max_tokens = 40;
    r.params.stop_token_ids.clear();
  }
  const SpecRun run = generate(target, requests, nullptr, 0);
  std::vector<std::vector<int>> refs;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    refs.push_back(requests[i].prompt);
    const auto& out = run.outcomes[i][0].tokens;
    refs.back().insert(refs.back().end(), out.begin(), out.end());
  }
  return refs;
}

void expect_same(const SpecRun& expected, const SpecRun& actual, const std::string& what,
                 float logprob_tolerance) {
  const auto same_logprob = [&](float e, float a) {
    if (logprob_tolerance > 0.0f)
      EXPECT_NEAR(e, a, logprob_tolerance) << what;
    else
      EXPECT_EQ(e, a) << what;
  };
  ASSERT_EQ(expected.outcomes.size(), actual.outcomes.size());
  for (std::size_t i = 0; i < expected.outcomes.size(); ++i) {
    for (std::size_t c = 0; c < expected.outcomes[i].size(); ++c) {
      const Outcome& e = expected.outcomes[i][c];
      const Outcome& a = actual.outcomes[i][c];
      ASSERT_EQ(e.tokens, a.tokens) << what << ": request " << i << " choice " << c;
      EXPECT_EQ(e.finish, a.finish) << what << ": request " << i;
      for (std::size_t j = 0; j < e.samples.size(); ++j) {
        SCOPED_TRACE(what + ": request " + std::to_string(i));
        same_logprob(e.samples[j].logprob, a.samples[j].logprob);
        ASSERT_EQ(e.samples[j].top_logprobs.size(), a.samples[j].top_logprobs.size());
        for (std::size_t t = 0; t < e.samples[j].top_logprobs.size(); ++t) {
          EXPECT_EQ(e.samples[j].top_logprobs[t].token, a.samples[j].top_logprobs[t].token);
          same_logprob(e.samples[j].top_logprobs[t].logprob, a.samples[j].top_logprobs[t].logprob);
        }
      }
    }
  }
}

// The counters of one run: drafts verified, the per-position counts add up to the accepted
// tokens, no position accepts more than the one before it, every KV block came back.
void expect_counters_add_up(const SpecRun& run, int k, const std::string& model_name) {
  const double drafts = spec_metric(run.metrics, "num_drafts", model_name);
  const double drafted = spec_metric(run.metrics, "num_draft_tokens", model_name);
  const double accepted = spec_metric(run.metrics, "num_accepted_tokens", model_name);
  EXPECT_LE(drafted, drafts * k);
  EXPECT_LE(accepted, drafted);
  const std::string model = "model_name=\"" + model_name + "\"";
  double per_pos_sum = 0, previous = drafts;
  for (int p = 0; p < k; ++p) {
    const double at = metric(run.metrics, "nibble_spec_decode_num_accepted_tokens_per_pos_total{" +
                                              model + ",position=\"" + std::to_string(p) + "\"}");
    EXPECT_LE(at, previous) << "position " << p;
    previous = at;
    per_pos_sum += at;
  }
  EXPECT_EQ(per_pos_sum, accepted);
  double generated = 0;
  for (const auto& request : run.outcomes)
    for (const Outcome& o : request) generated += double(o.tokens.size());
  EXPECT_EQ(metric(run.metrics, "nibble_generation_tokens_total{" + model + "}"), generated);
  EXPECT_EQ(metric(run.metrics, "nibble_kv_cache_usage_ratio{" + model + "}"), 0.0)
      << "KV blocks still held after every request finished";
}

void add_mid_draft_stops(std::vector<Request>& requests,
                         const std::vector<std::vector<int>>& refs) {
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto& ref = refs[i];
    const std::size_t at = requests[i].prompt.size() + 2 + i % 5;
    if (i % 4 == 1 && at < ref.size()) requests[i].params.stop_token_ids = {ref[at]};
  }
}

void expect_greedy_exactness(const SpecTarget& target, int batch, bool ngram_accepts) {
  const int vocab = target.backend->config().vocab_size;
  std::vector<Request> requests = mixed_greedy_requests(batch);
  const auto refs = greedy_references(target, requests);
  add_mid_draft_stops(requests, refs);
  const SpecRun baseline = generate(target, requests, nullptr, 0);
  EXPECT_EQ(baseline.metrics.find("nibble_spec_decode"), std::string::npos)
      << "the counters exist only with a drafter";

  const SpecRun ngram = generate(target, requests, std::make_shared<spec::NgramDrafter>(1, 3), 4);
  expect_same(baseline, ngram, "ngram");
  expect_counters_add_up(ngram, 4);
  // The one request of batch 1 (a 3-token prompt, 7 tokens) gives prompt lookup nothing to find.
  if (batch > 1 && ngram_accepts) {
    EXPECT_GT(spec_metric(ngram.metrics, "num_accepted_tokens"), 0);
  }

  const SpecRun oracle =
      generate(target, requests,
               std::make_shared<ReferenceDrafter>(ReferenceDrafter::Mode::kOracle, refs, vocab), 4);
  expect_same(baseline, oracle, "oracle");
  expect_counters_add_up(oracle, 4);
  EXPECT_GT(spec_metric(oracle.metrics, "num_drafts"), 0);
  EXPECT_EQ(spec_metric(oracle.metrics, "num_accepted_tokens"),
            spec_metric(oracle.metrics, "num_draft_tokens"))
      << "the oracle proposes the target's own tokens: every one is accepted";

  const SpecRun wrong =
      generate(target, requests,
               std::make_shared<ReferenceDrafter>(ReferenceDrafter::Mode::kWrong, refs, vocab), 3);
  expect_same(baseline, wrong, "wrong");
  expect_counters_add_up(wrong, 3);
  EXPECT_GT(spec_metric(wrong.metrics, "num_draft_tokens"), 0);
  EXPECT_EQ(spec_metric(wrong.metrics, "num_accepted_tokens"), 0);
}

}  // namespace nibble::runtime::testing
