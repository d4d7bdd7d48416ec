#include "tools/ngram-bench/ngram_bench_options.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "cli/flag_reader.h"

namespace nibble::tools {

const char* const kNgramBenchUsage =
    R"(usage: nibble-ngram-bench --tokenizer DIR --corpus PATH [options]

The n-gram drafter (speculative decoding's "ngram" method) on request shapes whose output
repeats the prompt, built from real text: each request's answer is what an ideal model would
write, so acceptance is measured without model weights (teacher forcing: each step keeps the
drafts that equal the answer's next tokens, plus one token of the target's own). Prints, per
workload, context size and k: tokens per step, acceptance, acceptance per draft position, the
drafter's time per step, and with --verify-cost the speed-up those steps project.

  --tokenizer DIR           a model directory with tokenizer.json
  --corpus PATH             a text or source file, or a directory of them; repeatable
  --workloads LIST          extraction,code-edit,unrelated (default: all three)
  --context-tokens LIST     context budgets in tokens (default 4096,16384)
  --ks LIST                 drafts per step (default 1,2,4,5)
  --requests N              requests per workload and context (default 16)
  --prompt-lookup MIN:MAX   n-gram sizes, as prompt_lookup_min/max (default 5:5, the engine's)
  --seed S                  workload seed (default 1)
  --verify-cost K:ALL:NONE  cost of a verify step of K drafts, in decode steps, with every draft
                            accepted and with none (nibble-spec-bench's oracle and always-wrong
                            runs: (K + 1) x decode tok/s / oracle tok/s, and decode tok/s /
                            always-wrong tok/s); repeatable; rows of other k are not projected
  --decode-step-ms MS       a decode step's time, to set the drafter's time against
  --json                    one JSON object per line instead of the table
)";

namespace {

std::vector<int> ints(cli::FlagReader& f, int lo, int hi) {
  std::vector<int> out;
  for (long long v : f.integers(lo, hi)) out.push_back(int(v));
  return out;
}

std::vector<Workload> workloads(const std::string& names) {
  std::vector<Workload> out;
  std::size_t at = 0;
  while (at <= names.size()) {
    const std::size_t comma = std::min(names.find(',', at), names.size());
    const std::string name = names.substr(at, comma - at);
    const std::size_t before = out.size();
    for (Workload w : {Workload::kExtraction, Workload::kCodeEdit, Workload::kUnrelated})
      if (name == workload_name(w)) out.push_back(w);
    if (out.size() == before)
      throw std::invalid_argument("nibble-ngram-bench: --workloads: unknown workload '" + name +
                                  "' (known: extraction, code-edit, unrelated)");
    at = comma + 1;
  }
  return out;
}

}  // namespace

std::optional<NgramBenchOptions> parse_ngram_bench_options(int argc, char** argv) {
  NgramBenchOptions o;
  const bool parsed =
      cli::parse_flags("nibble-ngram-bench", kNgramBenchUsage, argc, argv, [&](cli::FlagReader& f) {
        if (f.is("--tokenizer")) {
          o.tokenizer = f.value();
        } else if (f.is("--corpus")) {
          o.corpus.push_back(f.value());
        } else if (f.is("--workloads")) {
          o.workloads = workloads(f.value());
        } else if (f.is("--context-tokens")) {
          o.context_tokens = ints(f, 64, 1 << 20);
        } else if (f.is("--ks")) {
          o.ks = ints(f, 1, 64);
        } else if (f.is("--requests")) {
          o.requests = int(f.integer(1, 100000));
        } else if (f.is("--prompt-lookup")) {
          const std::string v = f.value();
          const std::size_t colon = v.find(':');
          const auto lo = cli::parse_integer(v.substr(0, colon), 1, 64);
          const auto hi = colon == std::string::npos
                              ? std::nullopt
                              : cli::parse_integer(v.substr(colon + 1), lo.value_or(1), 64);
          if (!lo || !hi)
            throw std::invalid_argument(
                "nibble-ngram-bench: --prompt-lookup expects MIN:MAX with 1 <= MIN <= MAX <= 64, "
                "got '" +
                v + "'");
          o.min_n = int(*lo);
          o.max_n = int(*hi);
        } else if (f.is("--seed")) {
          o.seed = std::uint64_t(f.integer(0, 1LL << 62));
        } else if (f.is("--verify-cost")) {
          parse_verify_cost(f.value(), o.verify_costs);
        } else if (f.is("--decode-step-ms")) {
          o.decode_step_ms = f.number(1e-6, 1e6);
        } else if (f.is("--json")) {
          o.json = true;
        } else {
          return false;
        }
        return true;
      });
  if (!parsed) return std::nullopt;
  const char* missing = o.tokenizer.empty() ? "--tokenizer DIR"
                        : o.corpus.empty()  ? "--corpus PATH"
                                            : nullptr;
  if (missing) {
    std::fprintf(stderr, "nibble-ngram-bench: %s is required\n", missing);
    return std::nullopt;
  }
  return o;
}

}  // namespace nibble::tools
