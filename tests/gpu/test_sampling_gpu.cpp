// The device sampling pass (kernels/sampling/sample_rows.h) against its CPU reference
// (sampling_ref.h) on fresh random logits (the seed is printed; NIBBLE_TEST_SEED reruns it) over
// vocabularies 1000, 32000, 128256, 151936, batches 1..64 and every parameter combination:
//  - greedy rows and the top logprobs' ids: identical (no transcendental decides them);
//  - sampled rows: identical ids except where two candidates are within rounding of each other
//    (expf/logf differ by an ulp or two between the device and glibc): at most 0.5% of the rows,
//    and even then the device's token must be one the reference keeps;
//  - logprobs within 2e-4 (FP32 sums over up to 152k terms against FP64);
//  - every output written (the outputs are poisoned first);
//  - a multinomial test: 32,000 device draws of a 4-token distribution within 4 sigma.
// Every A/B setting of the pass (sample_rows.h SampleRowsTuning) runs on the same steps, and once
// captured in a CUDA graph. `--bench` prints each setting's time per step at batch 1, 8, 64 for
// vocab 128256 and 151936, with a device-to-device copy of the logits as the floor.
// `--quick` checks a few small steps only (for compute-sanitizer). Exits 77 (ctest: skipped)
// without a GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/sampling/sample_rows.h"
#include "kernels/sampling/sampling_ref.h"
#include "tests/gpu/gpu_check_support.h"

namespace nibble {
namespace {

using gpu_test::Results;
using kernels::SampledRow;
using kernels::SamplingPenalty;
using kernels::SamplingRow;
using kernels::TopLogprob;

template <typename T>
using Device = gpu_test::DeviceArray<T>;

// One step's inputs: logits, rows' parameters, penalty lists, bitmasks.
struct Step {
  int rows = 0, vocab = 0, words = 0;
  std::vector<float> logits;
  std::vector<SamplingRow> params;
  std::vector<SamplingPenalty> penalties;
  std::vector<std::uint32_t> bitmask;  // [rows, words]; a row uses its own when it has one
};

Step random_step(std::mt19937_64& gen, int rows, int vocab) {
  Step s;
  s.rows = rows;
  s.vocab = vocab;
  s.words = (vocab + 31) / 32;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  s.logits.resize(std::size_t(rows) * std::size_t(vocab));
  for (int r = 0; r < rows; ++r) {
    float* row = s.logits.data() + std::size_t(r) * std::size_t(vocab);
    // Rows of different sharpness: scale 1 (flat, many candidates) to 8 (a few dominate).
    const float scale = 1.0f + 7.0f * unit(gen);
    for (int i = 0; i < vocab; ++i) row[i] = scale * normal(gen);
    const float shape = unit(gen);
    if (shape < 0.1f) {  // one token far ahead: top-p keeps only it
      row[gen() % std::uint64_t(vocab)] += 40.0f;
    } else if (shape < 0.2f) {  // nearly flat: top-p keeps nearly all
      for (int i = 0; i < vocab; ++i) row[i] = 0.01f * normal(gen);
    } else if (shape < 0.3f) {  // every logit equal
      std::fill(row, row + vocab, 1.5f);
    } else if (shape < 0.45f) {  // a few distinct values: long runs of equal logits at thresholds
      for (int i = 0; i < vocab; ++i) row[i] = std::round(2.0f * row[i] / scale) / 2.0f;
    } else if (shape < 0.55f) {  // mostly -inf (a grammar's mask applied upstream)
      for (int i = 0; i < vocab; ++i)
        if (unit(gen) < 0.99f) row[i] = -INFINITY;
      row[gen() % std::uint64_t(vocab)] = 0.0f;
    }
  }
  s.bitmask.assign(std::size_t(rows) * std::size_t(s.words), 0xffffffffu);
  const float temperatures[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.5f};
  const int top_ks[] = {0, 0, 1, 5, 50, 2000, vocab - 1, vocab};
  const float top_ps[] = {1.0f, 1.0f, 0.99f, 0.95f, 0.8f, 0.3f, 0.01f};
  const float min_ps[] = {0.0f, 0.0f, 0.05f, 0.2f};
  const int tops[] = {0, 0, 1, 5, 20, 32};
  auto pick = [&gen](const auto& options) {
    return options[std::uniform_int_distribution<std::size_t>(0, std::size(options) - 1)(gen)];
  };
  for (int r = 0; r < rows; ++r) {
    SamplingRow p;
    p.temperature = pick(temperatures);
    p.top_k = pick(top_ks);
    p.top_p = pick(top_ps);
    p.min_p = pick(min_ps);
    p.num_top_logprobs = pick(tops);
    p.seed = gen();
    p.position = gen() % 5000;
    if (unit(gen) < 0.4f) {
      p.repetition_penalty = unit(gen) < 0.5f ? 1.0f : 0.7f + unit(gen);
      p.frequency_penalty = unit(gen) < 0.5f ? 0.0f : 4.0f * unit(gen) - 2.0f;
      p.presence_penalty = unit(gen) < 0.5f ? 0.0f : 4.0f * unit(gen) - 2.0f;
      // Unique tokens, the likeliest ones among them so that the penalties matter.
      std::vector<int> ids(static_cast<std::size_t>(vocab));
      for (int i = 0; i < vocab; ++i) ids[std::size_t(i)] = i;
      const float* row = s.logits.data() + std::size_t(r) * std::size_t(vocab);
      const std::size_t n = std::min<std::size_t>(std::size_t(vocab), 1 + gen() % 300);
      std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(n / 2 + 1), ids.end(),
                        [row](int a, int b) { return row[a] > row[b]; });
      std::shuffle(ids.begin() + std::ptrdiff_t(n / 2 + 1), ids.end(), gen);
      p.penalty_offset = int(s.penalties.size());
      p.penalty_count = int(n);
      for (std::size_t j = 0; j < n; ++j)
        s.penalties.push_back({ids[j], int(gen() % 3) * int(gen() % 4)});
      if (unit(gen) < 0.2f) s.penalties.push_back({vocab + 3, 1}), ++p.penalty_count;  // ignored
    }
    if (unit(gen) < 0.3f) {
      p.bitmask_offset = r * s.words;
      const float density = unit(gen) < 0.5f ? 0.5f : 0.01f;
      std::uint32_t* mask = s.bitmask.data() + std::size_t(r) * std::size_t(s.words);
      std::fill(mask, mask + s.words, 0u);
      for (int i = 0; i < vocab; ++i)
        if (unit(gen) < density) mask[i / 32] |= 1u << (i % 32);
      const int forced = int(gen() % std::uint64_t(vocab));
      mask[forced / 32] |= 1u << (forced % 32);  // never empty
    }
    s.params.push_back(p);
  }
  return s;
}

struct DeviceRun {
  std::vector<SampledRow> out;
  std::vector<TopLogprob> top;
};

// The pass's A/B settings (sample_rows.h SampleRowsTuning): the first kernel; the split kernel on
// one block a row with plain, match-aggregated and ballot-aggregated histogram adds; split over up
// to 8 and 16 blocks a row (the launcher lowers that where rows x blocks would exceed the SMs).
struct Setting {
  const char* name;
  kernels::SampleRowsTuning tuning;
};
const Setting kSettings[] = {
    {"first kernel", {0, 1, 0}},      {"split 1 atomic", {1, 1, 0}},
    {"split 1 match", {1, 1, 1}},     {"split 1 ballot", {1, 1, 2}},
    {"split <=8 match", {1, 8, 1}},   {"split <=8 ballot", {1, 8, 2}},
    {"split <=16 match", {1, 16, 1}},
};

DeviceRun run_on_device(const Step& s, const kernels::SampleRowsTuning& tuning = {},
                        bool graph = false) {
  Device<float> logits(s.logits.size());
  Device<SamplingRow> params(s.params.size());
  Device<SamplingPenalty> penalties(s.penalties.size());
  Device<float> penalty_raw(s.penalties.size());
  Device<std::uint32_t> bitmask(s.bitmask.size());
  Device<SampledRow> out(static_cast<std::size_t>(s.rows));
  Device<TopLogprob> top(std::size_t(s.rows) * kernels::kMaxSampledTopLogprobs);
  logits.upload(s.logits);
  params.upload(s.params);
  penalties.upload(s.penalties);
  bitmask.upload(s.bitmask);
  NIBBLE_CUDA_CHECK(cudaMemset(out.ptr, 0xff, out.n * sizeof(SampledRow)));  // poison: token -1
  NIBBLE_CUDA_CHECK(cudaMemset(top.ptr, 0xff, top.n * sizeof(TopLogprob)));
  kernels::SampleRowsArgs a;
  a.logits = logits.ptr;
  a.rows = s.rows;
  a.vocab = s.vocab;
  a.params = params.ptr;
  a.penalties = penalties.ptr;
  a.penalty_raw = penalty_raw.ptr;
  a.bitmask = bitmask.ptr;
  a.out = out.ptr;
  a.top = top.ptr;
  a.tuning = tuning;
  if (!graph) {
    NIBBLE_CUDA_CHECK(kernels::sample_rows(a, nullptr));
  } else {  // captured and replayed as the decode graph does
    cudaStream_t stream;
    cudaGraph_t captured;
    cudaGraphExec_t exec;
    NIBBLE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    NIBBLE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    NIBBLE_CUDA_CHECK(kernels::sample_rows(a, stream));
    NIBBLE_CUDA_CHECK(cudaStreamEndCapture(stream, &captured));
    NIBBLE_CUDA_CHECK(cudaGraphInstantiate(&exec, captured, 0));
    NIBBLE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    NIBBLE_CUDA_CHECK(cudaStreamSynchronize(stream));
    (void)cudaGraphExecDestroy(exec);
    (void)cudaGraphDestroy(captured);
    (void)cudaStreamDestroy(stream);
  }
  NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
  return {out.download(std::size_t(s.rows)), top.download(top.n)};
}

struct Tally {
  int rows = 0, sampled_rows = 0, near_tie_mismatches = 0;
};

// The reference's answer for every row of a step (computed once, compared to every setting).
struct Reference {
  std::vector<SampledRow> out;
  std::vector<std::vector<TopLogprob>> top;
};

struct RowView {
  std::span<const float> logits;
  std::span<const SamplingPenalty> penalties;
  std::span<const std::uint32_t> mask;
};

RowView row_view(const Step& s, int r) {
  const SamplingRow& p = s.params[std::size_t(r)];
  RowView v;
  v.logits = {s.logits.data() + std::size_t(r) * std::size_t(s.vocab), std::size_t(s.vocab)};
  v.penalties = {s.penalties.data() + p.penalty_offset, std::size_t(p.penalty_count)};
  if (p.bitmask_offset >= 0)
    v.mask = {s.bitmask.data() + std::size_t(p.bitmask_offset), std::size_t(s.words)};
  return v;
}

Reference reference(const Step& s) {
  Reference ref;
  for (int r = 0; r < s.rows; ++r) {
    const RowView v = row_view(s, r);
    std::vector<TopLogprob> top;
    ref.out.push_back(kernels::sample_row_reference(v.logits, s.params[std::size_t(r)], v.penalties,
                                                    v.mask, top));
    ref.top.push_back(std::move(top));
  }
  return ref;
}

// Compares one step's device run; returns false (and says why) on a failure.
bool compare_step(const Step& s, const Reference& ref, const DeviceRun& d, Tally& tally,
                  std::string& why) {
  for (int r = 0; r < s.rows; ++r) {
    const SamplingRow& p = s.params[std::size_t(r)];
    const SampledRow want = ref.out[std::size_t(r)];
    const std::vector<TopLogprob>& top = ref.top[std::size_t(r)];
    const SampledRow got = d.out[std::size_t(r)];
    const std::string where = "row " + std::to_string(r) + " (vocab " + std::to_string(s.vocab) +
                              ", T " + std::to_string(p.temperature) + ", k " +
                              std::to_string(p.top_k) + ", p " + std::to_string(p.top_p) + ")";
    ++tally.rows;
    if (got.token < 0 || got.token >= s.vocab) {
      why = where + ": token " + std::to_string(got.token) + " not written or out of range";
      return false;
    }
    if (got.token != want.token) {
      const RowView v = row_view(s, r);
      const auto kept = kernels::kept_tokens_reference(v.logits, p, v.penalties, v.mask);
      if (p.temperature <= 0.0f || !std::binary_search(kept.begin(), kept.end(), got.token)) {
        why = where + ": device token " + std::to_string(got.token) + ", reference " +
              std::to_string(want.token);
        return false;
      }
      ++tally.near_tie_mismatches;
    } else if (!(std::fabs(got.logprob - want.logprob) <= 2e-4f) &&
               !(std::isinf(want.logprob) && got.logprob == want.logprob)) {
      why = where + ": logprob " + std::to_string(got.logprob) + " vs " +
            std::to_string(want.logprob);
      return false;
    }
    if (p.temperature > 0.0f) ++tally.sampled_rows;
    for (std::size_t j = 0; j < top.size(); ++j) {
      const TopLogprob g = d.top[std::size_t(r) * kernels::kMaxSampledTopLogprobs + j];
      const bool same_logprob = std::fabs(g.logprob - top[j].logprob) <= 2e-4f ||
                                (std::isinf(top[j].logprob) && g.logprob == top[j].logprob);
      if (g.token != top[j].token || !same_logprob) {
        why = where + ": top logprob " + std::to_string(j) + " is (" + std::to_string(g.token) +
              ", " + std::to_string(g.logprob) + "), reference (" + std::to_string(top[j].token) +
              ", " + std::to_string(top[j].logprob) + ")";
        return false;
      }
    }
  }
  return true;
}

// Every setting on the same fresh steps, each against the reference. Vocabularies 7 (fewer
// 4-token groups than blocks), 1001 (not a multiple of 4: scalar loads), 1000 .. 151936.
void check_against_reference(Results& results, std::mt19937_64& gen, bool quick) {
  const std::vector<int> vocabs = quick ? std::vector<int>{7, 1001, 32000}
                                        : std::vector<int>{7, 1001, 1000, 32000, 128256, 151936};
  constexpr int kCount = int(std::size(kSettings));
  for (int vocab : vocabs) {
    Tally tally[kCount];
    std::string why[kCount];
    bool ok[kCount];
    std::fill(ok, ok + kCount, true);
    const std::vector<int> batches =
        quick ? std::vector<int>{1, 17} : std::vector<int>{1, 3, 8, 17, 64};
    for (int rows : batches) {
      const int repeats = quick ? 1 : vocab <= 32000 ? 6 : 2;
      for (int rep = 0; rep < repeats; ++rep) {
        const Step s = random_step(gen, rows, vocab);
        const Reference ref = reference(s);
        for (int k = 0; k < kCount; ++k)
          if (ok[k])
            ok[k] = compare_step(s, ref, run_on_device(s, kSettings[k].tuning), tally[k], why[k]);
      }
    }
    for (int k = 0; k < kCount; ++k) {
      // A near tie decides a draw about once in thousands of rows; more points at a real bug.
      if (ok[k] && tally[k].near_tie_mismatches * 200 > std::max(tally[k].sampled_rows, 20)) {
        ok[k] = false;
        why[k] = std::to_string(tally[k].near_tie_mismatches) + " of " +
                 std::to_string(tally[k].sampled_rows) + " sampled rows drew another token";
      }
      results.record(ok[k],
                     std::string("sample_rows (") + kSettings[k].name + ") vs reference, vocab " +
                         std::to_string(vocab),
                     ok[k] ? std::to_string(tally[k].rows) + " rows, " +
                                 std::to_string(tally[k].near_tie_mismatches) + " near-tie draws"
                           : why[k]);
    }
  }
}

// Each setting captured in a CUDA graph and replayed (as in the decode graph) gives what a plain
// launch gives.
void check_graph_capture(Results& results, std::mt19937_64& gen) {
  for (int rows : {1, 64}) {
    const Step s = random_step(gen, rows, 151936);
    for (const Setting& setting : kSettings) {
      // Captured first: the pass's one-time host queries (SMs, cluster sizes) run inside a
      // capture, as they may in the engine.
      const DeviceRun replay = run_on_device(s, setting.tuning, true);
      const DeviceRun plain = run_on_device(s, setting.tuning);
      bool same = true;
      for (int r = 0; r < rows; ++r)
        same = same && plain.out[std::size_t(r)].token == replay.out[std::size_t(r)].token &&
               plain.out[std::size_t(r)].logprob == replay.out[std::size_t(r)].logprob;
      results.record(same,
                     std::string("sample_rows (") + setting.name + ") in a graph, batch " +
                         std::to_string(rows),
                     same ? "replay matches the launch" : "replay differs from the launch");
    }
  }
}

// 32,000 draws from a known distribution: each frequency within 4 sigma.
void check_distribution(Results& results, std::mt19937_64& gen) {
  const double probs[] = {0.4, 0.3, 0.2, 0.1};
  Step s;
  s.rows = 64;
  s.vocab = 1000;
  s.words = (s.vocab + 31) / 32;
  std::vector<float> row(std::size_t(s.vocab), -INFINITY);
  for (int i = 0; i < 4; ++i) row[std::size_t(i) * 200 + 7] = float(std::log(probs[i]));
  std::vector<double> counts(4, 0.0);
  const std::uint64_t seed = gen();
  int draws = 0, outside = 0;
  for (int launch = 0; launch < 500; ++launch) {
    s.logits.clear();
    s.params.clear();
    for (int r = 0; r < s.rows; ++r) {
      s.logits.insert(s.logits.end(), row.begin(), row.end());
      SamplingRow p;
      p.seed = seed + std::uint64_t(r);
      p.position = std::uint64_t(launch);
      s.params.push_back(p);
    }
    const DeviceRun d = run_on_device(s);
    for (const SampledRow& o : d.out) {
      ++draws;
      if (o.token % 200 == 7 && o.token / 200 < 4)
        counts[std::size_t(o.token / 200)] += 1;
      else
        ++outside;
    }
  }
  bool ok = outside == 0;
  std::string detail;
  for (int i = 0; i < 4; ++i) {
    const double f = counts[std::size_t(i)] / draws;
    const double sigma = std::sqrt(probs[i] * (1 - probs[i]) / draws);
    ok = ok && std::fabs(f - probs[i]) < 4 * sigma;
    detail += std::to_string(f) + " (" + std::to_string(probs[i]) + ") ";
  }
  results.record(ok, "sample_rows multinomial draws",
                 detail + std::to_string(outside) + " outside");
}

// Median of 100 event-timed runs of `enqueue` (after 10 warm-up runs), in microseconds.
template <typename Enqueue>
double median_us(Enqueue enqueue) {
  cudaEvent_t start, stop;
  NIBBLE_CUDA_CHECK(cudaEventCreate(&start));
  NIBBLE_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 10; ++i) enqueue();
  std::vector<float> times;
  for (int i = 0; i < 100; ++i) {
    NIBBLE_CUDA_CHECK(cudaEventRecord(start));
    enqueue();
    NIBBLE_CUDA_CHECK(cudaEventRecord(stop));
    NIBBLE_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    NIBBLE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms * 1000.0f);
  }
  std::nth_element(times.begin(), times.begin() + 50, times.end());
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  return double(times[50]);
}

// The pass's time per step for each setting at batch 1, 8, 64, four parameter sets, and each
// time over a floor measured in the same run: a device-to-device copy of the step's logits
// (reads them once, as the pass must at least, and writes them once).
void bench() {
  std::mt19937_64 gen(1);
  std::printf("%-7s %-5s %-18s %9s", "vocab", "batch", "params", "copy us");
  for (const Setting& setting : kSettings) std::printf(" | %-18s", setting.name);
  std::printf("\n%-7s %-5s %-18s %9s", "", "", "", "");
  for (std::size_t k = 0; k < std::size(kSettings); ++k) std::printf(" | %8s %9s", "us", "x copy");
  std::printf("\n");
  for (int vocab : {128256, 151936}) {
    for (int rows : {1, 8, 64}) {
      for (int kind = 0; kind < 4; ++kind) {
        Step s = random_step(gen, rows, vocab);
        s.penalties.clear();
        for (SamplingRow& p : s.params) {
          p = SamplingRow{};
          p.seed = gen();
          if (kind == 0 || kind == 3) p.temperature = 0.0f;
          if (kind == 3) p.num_top_logprobs = 1;  // `generate --sample-on-device --top-k 1`
          if (kind == 2) p.top_k = 50, p.top_p = 0.9f, p.temperature = 0.7f, p.num_top_logprobs = 5;
        }
        const char* name = kind == 0   ? "greedy"
                           : kind == 1 ? "temperature 1"
                           : kind == 2 ? "T0.7 k50 p0.9 lp5"
                                       : "greedy lp1";
        Device<float> logits(s.logits.size());
        Device<float> copy(s.logits.size());
        Device<SamplingRow> params(s.params.size());
        Device<SampledRow> out(static_cast<std::size_t>(rows));
        Device<TopLogprob> top(std::size_t(rows) * kernels::kMaxSampledTopLogprobs);
        Device<float> raw(1);
        Device<SamplingPenalty> none(1);
        logits.upload(s.logits);
        params.upload(s.params);
        const double floor = median_us([&] {
          NIBBLE_CUDA_CHECK(cudaMemcpyAsync(copy.ptr, logits.ptr, s.logits.size() * sizeof(float),
                                            cudaMemcpyDeviceToDevice, nullptr));
        });
        std::printf("%-7d %-5d %-18s %9.1f", vocab, rows, name, floor);
        for (const Setting& setting : kSettings) {
          kernels::SampleRowsArgs a;
          a.logits = logits.ptr;
          a.rows = rows;
          a.vocab = vocab;
          a.params = params.ptr;
          a.penalties = none.ptr;
          a.penalty_raw = raw.ptr;
          a.out = out.ptr;
          a.top = top.ptr;
          a.tuning = setting.tuning;
          const double us = median_us([&] { NIBBLE_CUDA_CHECK(kernels::sample_rows(a, nullptr)); });
          std::printf(" | %8.1f %9.1f", us, us / floor);
        }
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace
}  // namespace nibble

int main(int argc, char** argv) {
  const std::string no_gpu = nibble::gpu_test::no_gpu_reason();
  if (!no_gpu.empty()) {
    std::printf("skipped: %s\n", no_gpu.c_str());
    return nibble::gpu_test::kSkipExitCode;
  }
  try {
    if (argc > 1 && std::strcmp(argv[1], "--bench") == 0) {
      nibble::bench();
      return 0;
    }
    std::mt19937_64 gen(nibble::gpu_test::test_seed());
    nibble::gpu_test::Results results;
    // --quick: fewer, smaller steps (for compute-sanitizer), no graphs or distribution test.
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    if (!quick) nibble::check_graph_capture(results, gen);  // first: no pass has run yet
    nibble::check_against_reference(results, gen, quick);
    if (!quick) nibble::check_distribution(results, gen);
    return results.exit_code();
  } catch (const std::exception& e) {
    std::printf("FAIL %s\n", e.what());
    return 1;
  }
}
