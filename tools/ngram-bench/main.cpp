// nibble-ngram-bench: the n-gram drafter's acceptance and cost on request shapes whose output
// repeats the prompt (issue 42's "n-gram on a real workload shape"), from real text and a real
// tokenizer, with no model weights; see kNgramBenchUsage.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "engine/spec/ngram_drafter.h"
#include "engine/tokenizer/tokenizer.h"
#include "tools/ngram-bench/ngram_bench_options.h"
#include "tools/ngram-bench/step_cost.h"
#include "tools/ngram-bench/teacher_forced.h"
#include "tools/ngram-bench/workloads.h"

namespace {

using namespace nibble;
using namespace nibble::tools;

struct Row {
  Workload workload;
  int context_tokens = 0, k = 0, requests = 0;
  double prompt_tokens = 0;  // mean
  DraftStats stats;
};

nlohmann::json row_json(const Row& r, const NgramBenchOptions& o) {
  const DraftStats& s = r.stats;
  nlohmann::json j = {{"workload", workload_name(r.workload)},
                      {"context_tokens", r.context_tokens},
                      {"k", r.k},
                      {"prompt_lookup", {o.min_n, o.max_n}},
                      {"requests", r.requests},
                      {"prompt_tokens_mean", r.prompt_tokens},
                      {"answer_tokens", s.tokens},
                      {"steps", s.steps},
                      {"tokens_per_step", s.tokens_per_step()},
                      {"acceptance_rate", s.acceptance_rate()},
                      {"steps_with_draft", s.steps_with_draft()},
                      {"propose_us_per_step", s.propose_us_per_step()}};
  for (int p = 0; p < r.k; ++p) j["accepted_at"].push_back(s.accepted_at(p));
  if (o.decode_step_ms > 0)
    j["propose_share_of_step"] = s.propose_us_per_step() / 1e3 / o.decode_step_ms;
  if (o.verify_costs.count(r.k)) j["projected_speedup"] = projected_speedup(s, o.verify_costs);
  return j;
}

void print_header(const NgramBenchOptions& o) {
  std::printf("n-gram drafter, prompt_lookup %d:%d, %d requests per row, seed %llu\n", o.min_n,
              o.max_n, o.requests, static_cast<unsigned long long>(o.seed));
  std::printf("%-11s %7s %2s %8s %7s %8s %6s %7s | %-23s | %9s%s%s\n", "workload", "context", "k",
              "prompt", "answer", "tok/step", "accept", "drafted", "accepted at 1 2 3 4", "us/step",
              o.decode_step_ms > 0 ? "  %step" : "", o.verify_costs.empty() ? "" : "  projected");
}

void print_row(const Row& r, const NgramBenchOptions& o) {
  const DraftStats& s = r.stats;
  std::string at;
  for (int p = 0; p < 4; ++p) {
    char cell[8];
    if (p < r.k)
      std::snprintf(cell, sizeof cell, "%5.2f", s.accepted_at(p));
    else
      std::snprintf(cell, sizeof cell, "%5s", "-");
    at += (p ? " " : "") + std::string(cell);
  }
  const double us = s.propose_us_per_step();
  std::printf("%-11s %7d %2d %8.0f %7ld %8.2f %5.1f%% %6.1f%% | %-23s | %9.1f",
              workload_name(r.workload), r.context_tokens, r.k, r.prompt_tokens, s.tokens,
              s.tokens_per_step(), 100 * s.acceptance_rate(),
              100.0 * double(s.steps_with_draft()) / double(s.steps), at.c_str(), us);
  if (o.decode_step_ms > 0) std::printf("  %5.2f%%", 100 * us / 1e3 / o.decode_step_ms);
  if (o.verify_costs.count(r.k))
    std::printf("  %8.2fx", projected_speedup(s, o.verify_costs));
  else if (!o.verify_costs.empty())
    std::printf("  %9s", "-");
  std::printf("\n");
}

int run(const NgramBenchOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_directory(o.tokenizer);
  std::vector<Document> corpus = read_corpus(o.corpus);
  const std::size_t files = corpus.size();
  spdlog::info("tokenizing {} files of the corpus", files);
  const WorkloadBuilder builder(tok, std::move(corpus));
  spdlog::info("corpus tokenized in {:.1f} s",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  const spec::NgramDrafter drafter(o.min_n, o.max_n);
  if (!o.json) print_header(o);
  for (Workload w : o.workloads) {
    for (int context : o.context_tokens) {
      std::vector<Request> requests;
      double prompt_tokens = 0;
      for (int i = 0; i < o.requests; ++i) {
        requests.push_back(builder.build(w, context, o.seed, i));
        prompt_tokens += double(requests.back().prompt.size()) / o.requests;
      }
      spdlog::info("{} at {} tokens: {} requests built", workload_name(w), context, o.requests);
      for (int k : o.ks) {
        Row row{w, context, k, o.requests, prompt_tokens, DraftStats(k)};
        for (const Request& r : requests)
          row.stats.add(teacher_forced(drafter, r.prompt, r.answer, k));
        if (o.json)
          std::printf("%s\n", row_json(row, o).dump().c_str());
        else
          print_row(row, o);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("nibble-ngram-bench"));
  const auto o = parse_ngram_bench_options(argc, argv);
  if (!o) {
    std::fprintf(stderr, "\n%s", kNgramBenchUsage);
    return 2;
  }
  try {
    return run(*o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nibble-ngram-bench: %s\n", e.what());
    return 1;
  }
}
