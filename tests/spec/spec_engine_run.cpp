#include "tests/spec/spec_engine_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <sstream>

#include "engine/backend/backend_model_runner.h"

namespace nibble::runtime::testing {

using namespace std::chrono_literals;

SpecRun run_engine(backend::Backend& backend, const std::vector<Request>& requests,
                   std::shared_ptr<const spec::Drafter> drafter, int k, const EngineShape& shape) {
  backend::BackendModelRunner runner(backend, shape.num_blocks, shape.block_size);
  metrics::Registry registry;
  EngineConfig config;
  config.model_name = shape.model_name;
  config.max_model_len = shape.max_model_len;
  config.scheduler = {.max_num_seqs = shape.max_num_seqs,
                      .max_num_batched_tokens = shape.max_num_batched_tokens};
  config.drafter = std::move(drafter);
  config.num_speculative_tokens = k;
  EngineLoop engine(config, runner, registry);
  engine.start();
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

}  // namespace nibble::runtime::testing
