// nibble-spec-bench: what speculative decoding can give on a model and what it costs, without a
// drafter's quality in the way. One batch-1 greedy request runs through the engine loop (the
// server's path: scheduler, verify, device sampling where the backend has it) without
// speculation, which gives the target's own continuation; then with test-only drafters that know
// it (engine/spec/reference_drafter.h): the oracle at each k (every draft accepted, the verify
// path's ceiling) and the always-wrong drafter (every draft rejected, a rejected draft's cost).
// Near ties of random weights make the verify path's greedy tokens differ from decoding alone's
// now and then; converged() below takes the drafts from the speculative runs themselves.
// Decode tokens/s is (tokens - 1) over the time from the first token to the last; each mode's
// ratio is against the run without speculation in the same process. "replays" counts the run's
// steps replayed from CUDA graphs (verify steps too: the fast path), against its steps.
//   nibble-spec-bench --model DIR [--device cuda] [--prompt-len 512] [--tokens 128]
//                     [--ks 1,2,4] [--wrong-k 4] [--rounds 2]
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/backend_model_runner.h"
#include "engine/backend/select_backend.h"
#include "engine/model/model_weights.h"
#include "engine/runtime/engine_loop.h"
#include "engine/spec/reference_drafter.h"
#include "metrics/registry.h"
#include "tools/bench/server_metrics.h"

namespace {

using namespace nibble;
using Clock = std::chrono::steady_clock;

constexpr const char* kUsage =
    "usage: nibble-spec-bench --model DIR [--device auto|cpu|cuda] [--prompt-len N]\n"
    "                         [--tokens N] [--ks 1,2,4] [--wrong-k K] [--rounds N]\n";

struct Options {
  std::string model, device = "auto";
  int prompt_len = 512, tokens = 128, wrong_k = 4, rounds = 2;
  std::vector<int> ks = {1, 2, 4};
};

struct Run {
  std::vector<int> tokens;
  double decode_tokens_per_second = 0;
  double accepted = 0, drafted = 0;
  std::uint64_t graph_replays = 0, steps = 0;
};

// One greedy request of `tokens` tokens through a fresh engine loop on the runner.
Run run_once(backend::BackendModelRunner& runner, const backend::Backend& backend, const Options& o,
             const std::vector<int>& prompt, std::shared_ptr<const spec::Drafter> drafter, int k) {
  const std::uint64_t replays_before = backend.decode_graph_replays();
  metrics::Registry registry;
  runtime::EngineConfig config;
  config.model_name = "bench";
  config.max_model_len = o.prompt_len + o.tokens + 16;
  config.enable_prefix_caching = false;  // every run prefills the whole prompt alike
  config.scheduler = {.max_num_seqs = 1, .max_num_batched_tokens = std::max(o.prompt_len, 512)};
  config.drafter = std::move(drafter);
  config.num_speculative_tokens = k;
  runtime::EngineLoop engine(config, runner, registry);
  engine.start();
  runtime::GenerationRequest r;
  r.id = "bench";
  r.prompt = prompt;
  r.params.max_tokens = o.tokens;
  r.params.temperature = 0;
  r.params.ignore_eos = true;
  r.channel = std::make_shared<runtime::OutputChannel>();
  auto channel = r.channel;
  if (engine.submit(std::move(r)).status != runtime::SubmitStatus::kAccepted) {
    throw std::runtime_error("the engine refused the request");
  }
  Run run;
  Clock::time_point first{}, last{};
  bool done = false;
  const auto deadline = Clock::now() + std::chrono::minutes(5);
  while (!done && Clock::now() < deadline) {
    for (runtime::TokenEvent& e : channel->pop(std::chrono::milliseconds(1))) {
      if (e.token >= 0) {
        last = Clock::now();
        if (run.tokens.empty()) first = last;
        run.tokens.push_back(e.token);
      }
      done |= e.finish != runtime::FinishReason::kNone;
    }
  }
  engine.drain_and_stop(std::chrono::seconds(5));
  if (!done) throw std::runtime_error("the request did not finish in five minutes");
  const double seconds = std::chrono::duration<double>(last - first).count();
  if (run.tokens.size() > 1 && seconds > 0)
    run.decode_tokens_per_second = double(run.tokens.size() - 1) / seconds;
  const std::string text = registry.render();
  run.drafted = bench::series_sum(text, "nibble_spec_decode_num_draft_tokens_total");
  run.accepted = bench::series_sum(text, "nibble_spec_decode_num_accepted_tokens_total");
  run.graph_replays = backend.decode_graph_replays() - replays_before;
  // Each step emits its accepted drafts and one token of its own (the prefill step its first).
  run.steps = std::uint64_t(double(run.tokens.size()) - run.accepted + 0.5);
  return run;
}

using Mode = spec::ReferenceDrafter::Mode;
constexpr int kMaxRuns = 40;

// The reference drafters propose the continuation they are given. A verify step computes k + 1
// positions at once, whose BF16 logits differ in the last bits from one-position steps', so on a
// near tie (random weights have many) the verified token can differ from the one decoding alone
// picked, and the sequence leaves the reference. So the continuation is taken from the
// speculative runs themselves until a run reproduces the continuation it was given (each run
// agrees with its reference at least up to the first such tie, so the agreeing prefix grows):
// that run is measured. Returns it and the number of runs it took (kMaxRuns + 1: none agreed).
std::pair<Run, int> converged(backend::BackendModelRunner& runner, const backend::Backend& backend,
                              const Options& o, const std::vector<int>& prompt,
                              std::vector<int> continuation, Mode mode, int k, int vocab) {
  Run run;
  for (int runs = 1; runs <= kMaxRuns; ++runs) {
    std::vector<int> reference = prompt;
    reference.insert(reference.end(), continuation.begin(), continuation.end());
    auto drafter = std::make_shared<spec::ReferenceDrafter>(
        mode, std::vector<std::vector<int>>{reference}, vocab);
    run = run_once(runner, backend, o, prompt, drafter, k);
    if (run.tokens == continuation) return {run, runs};
    continuation = run.tokens;
  }
  return {run, kMaxRuns + 1};
}

std::vector<int> parse_ks(const std::string& s) {
  std::vector<int> ks;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) ks.push_back(std::atoi(part.c_str()));
  return ks;
}

int run_bench(const Options& o) {
  backend::BackendOptions options;
  options.device = o.device;
  auto backend = backend::make_backend(options, model::load_model(o.model));
  if (!backend->logits_at_several_positions()) {
    std::fprintf(stderr,
                 "nibble-spec-bench: the %s backend does not verify drafts for this model\n",
                 backend->name().c_str());
    return 2;
  }
  const int vocab = backend->config().vocab_size;
  const int block_size = 16;
  const int blocks = (o.prompt_len + o.tokens + 64) / block_size + 2;
  backend::BackendModelRunner runner(*backend, blocks, block_size);
  std::vector<int> prompt(static_cast<std::size_t>(o.prompt_len));
  for (int i = 0; i < o.prompt_len; ++i) prompt[std::size_t(i)] = 1 + i % (vocab - 1);

  (void)run_once(runner, *backend, o, prompt, nullptr, 0);  // warm-up: graphs, allocations
  std::printf("%-10s %4s %10s %10s %9s %6s %13s\n", "mode", "k", "tok/s", "vs plain", "accepted",
              "runs", "replays/steps");
  for (int round = 0; round < o.rounds; ++round) {
    const Run plain = run_once(runner, *backend, o, prompt, nullptr, 0);
    std::printf("%-10s %4d %10.2f %10.3f %9s %6s %6llu/%-6llu\n", "plain", 0,
                plain.decode_tokens_per_second, 1.0, "-", "-",
                static_cast<unsigned long long>(plain.graph_replays),
                static_cast<unsigned long long>(plain.steps));
    const auto report = [&](const char* mode, int k, const Run& r, int runs) {
      const double acceptance = r.drafted > 0 ? r.accepted / r.drafted : 0;
      std::printf(
          "%-10s %4d %10.2f %10.3f %8.1f%% %6d %6llu/%-6llu%s\n", mode, k,
          r.decode_tokens_per_second, r.decode_tokens_per_second / plain.decode_tokens_per_second,
          100 * acceptance, runs, static_cast<unsigned long long>(r.graph_replays),
          static_cast<unsigned long long>(r.steps), runs > kMaxRuns ? " (not converged)" : "");
    };
    for (int k : o.ks) {
      const auto [run, runs] =
          converged(runner, *backend, o, prompt, plain.tokens, Mode::kOracle, k, vocab);
      report("oracle", k, run, runs);
    }
    if (o.wrong_k > 0) {
      const auto [run, runs] =
          converged(runner, *backend, o, prompt, plain.tokens, Mode::kWrong, o.wrong_k, vocab);
      report("wrong", o.wrong_k, run, runs);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);  // the engine loop's per-run lines would drown the table
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (a == "--model" && has_value)
      o.model = argv[++i];
    else if (a == "--device" && has_value)
      o.device = argv[++i];
    else if (a == "--prompt-len" && has_value)
      o.prompt_len = std::atoi(argv[++i]);
    else if (a == "--tokens" && has_value)
      o.tokens = std::atoi(argv[++i]);
    else if (a == "--ks" && has_value)
      o.ks = parse_ks(argv[++i]);
    else if (a == "--wrong-k" && has_value)
      o.wrong_k = std::atoi(argv[++i]);
    else if (a == "--rounds" && has_value)
      o.rounds = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "nibble-spec-bench: unknown or incomplete option %s\n\n%s", a.c_str(),
                   kUsage);
      return 2;
    }
  }
  if (o.model.empty() || o.prompt_len < 1 || o.tokens < 2 || o.rounds < 1 ||
      std::any_of(o.ks.begin(), o.ks.end(), [](int k) { return k < 1 || k > 16; })) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  try {
    return run_bench(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nibble-spec-bench: %s\n", e.what());
    return 1;
  }
}
