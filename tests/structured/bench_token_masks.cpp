// Per-token mask cost with a real tokenizer's vocabulary (what the engine pays per constrained
// decode step), without a model: seeded random walks through a schema's grammar, each step
// picking a random allowed token, as a random-weight model does.
//   bench_token_masks TOKENIZER_DIR SCHEMA.json [--walks N] [--steps N] [--seed N]
// Prints the vocabulary preparation time, the schema's compile time (grammar + the initial
// state's mask, what the first request pays), and the mean / p50 / p99 / max mask time per
// token for the first walk (cold caches) and the later ones (warm), plus the cache sizes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/structured/grammar_cache.h"
#include "engine/structured/token_bitmask.h"
#include "engine/tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
using nibble::structured::bitmask_allows;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void report(const char* label, std::vector<double> times) {
  if (times.empty()) return;
  std::sort(times.begin(), times.end());
  double sum = 0;
  for (double t : times) sum += t;
  std::printf("%-6s masks %6zu  mean %8.3f ms  p50 %8.3f ms  p99 %8.3f ms  max %8.3f ms\n", label,
              times.size(), sum / double(times.size()), times[times.size() / 2],
              times[std::min(times.size() - 1, times.size() * 99 / 100)], times.back());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: bench_token_masks TOKENIZER_DIR SCHEMA.json [--walks N] [--steps N] "
                 "[--seed N]\n");
    return 2;
  }
  int walks = 6, steps = 128;
  unsigned seed = 0;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--walks") walks = std::stoi(argv[i + 1]);
    if (flag == "--steps") steps = std::stoi(argv[i + 1]);
    if (flag == "--seed") seed = unsigned(std::stoul(argv[i + 1]));
  }
  try {
    const auto tokenizer = nibble::tokenizer::Tokenizer::from_directory(argv[1]);
    std::ifstream in(argv[2]);
    if (!in) throw std::runtime_error(std::string("cannot read ") + argv[2]);
    nibble::structured::OutputSpec spec;
    spec.kind = nibble::structured::OutputKind::kJsonSchema;
    spec.schema = nlohmann::ordered_json::parse(in);

    // EOS: the id after the last ordinary token stands in (only its bit matters here).
    const std::size_t vocab_size = tokenizer.vocab_size() + 1;
    const int eos = int(vocab_size) - 1;
    auto start = Clock::now();
    auto vocabulary = nibble::structured::TokenVocabulary::from_tokenizer(tokenizer, vocab_size,
                                                                          std::vector<int>{eos});
    std::printf("vocabulary: %zu ids, prepared in %.1f ms\n", vocabulary->size(), ms_since(start));
    nibble::structured::GrammarCache cache(vocabulary, {});
    start = Clock::now();
    const auto compiled = cache.get(spec).grammar;
    std::printf("schema compile (grammar + initial mask): %.2f ms\n", ms_since(start));

    std::mt19937 rng(seed);
    std::vector<double> cold, warm;
    std::vector<std::uint32_t> mask(compiled->mask_words());
    std::size_t tokens = 0, completed = 0;
    for (int walk = 0; walk < walks; ++walk) {
      auto constraint = compiled->start();
      for (int step = 0; step < steps; ++step) {
        std::fill(mask.begin(), mask.end(), 0u);
        const auto t0 = Clock::now();
        constraint->fill_mask(mask);
        (walk == 0 ? cold : warm).push_back(ms_since(t0));
        std::vector<int> allowed;
        for (std::size_t id = 0; id < vocabulary->size(); ++id) {
          if (bitmask_allows(mask, id)) allowed.push_back(int(id));
        }
        if (allowed.empty()) break;
        const int token = allowed[rng() % allowed.size()];
        if (!constraint->advance(token)) throw std::runtime_error("an allowed token was refused");
        ++tokens;
        if (token == eos) {
          ++completed;
          break;
        }
      }
    }
    std::printf("walks %d (%zu completed), %zu tokens, seed %u\n", walks, completed, tokens, seed);
    report("cold", cold);
    report("warm", warm);
    std::vector<double> all = cold;
    all.insert(all.end(), warm.begin(), warm.end());
    report("all", all);
    std::printf("cached masks: %zu, automaton states: %zu\n", compiled->cached_states(),
                compiled->automaton_states());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_token_masks: %s\n", e.what());
    return 1;
  }
  return 0;
}
