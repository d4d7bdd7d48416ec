// Hot-path cost of metric updates, single-threaded and under contention from 2-8 threads
// hammering the same child metric. Reported in docs/performance.md and docs/metrics.md.
// BM_PrometheusCppHistogramObserve times prometheus::Histogram itself, the type the striped
// histogram stands in for, so the reason for that fast path can be re-measured.
#include <benchmark/benchmark.h>
#include <prometheus/histogram.h>

#include "metrics/registry.h"

namespace {

nibble::metrics::Registry& registry() {
  static nibble::metrics::Registry r;
  return r;
}

void BM_CounterInc(benchmark::State& state) {
  static auto& counter =
      registry().counter("nibble_bench_requests_total", "Bench.", {"model_name"}).labels({"m"});
  for (auto _ : state) counter.inc();
}
BENCHMARK(BM_CounterInc)->ThreadRange(1, 8)->UseRealTime();

void BM_GaugeInc(benchmark::State& state) {
  static auto& gauge =
      registry().gauge("nibble_bench_running", "Bench.", {"model_name"}).labels({"m"});
  for (auto _ : state) gauge.inc();
}
BENCHMARK(BM_GaugeInc)->ThreadRange(1, 8)->UseRealTime();

// vLLM's time-to-first-token buckets up to 80 s.
const std::vector<double> kBenchBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08,
                                           0.1,   0.25,  0.5,  0.75, 1.0,  2.5,  5.0,
                                           7.5,   10.0,  20.0, 40.0, 80.0};

template <typename Observe>
void observe_loop(benchmark::State& state, Observe observe) {
  double v = 0.0;
  for (auto _ : state) {
    observe(v);
    v = v > 50 ? 0.0 : v + 0.37;
  }
}

void BM_HistogramObserve(benchmark::State& state) {
  static auto& histogram =
      registry()
          .histogram("nibble_bench_latency_seconds", "Bench.", kBenchBuckets, {"model_name"})
          .labels({"m"});
  observe_loop(state, [](double v) { histogram.observe(v); });
}
BENCHMARK(BM_HistogramObserve)->ThreadRange(1, 8)->UseRealTime();

void BM_PrometheusCppHistogramObserve(benchmark::State& state) {
  static prometheus::Histogram histogram(kBenchBuckets);
  observe_loop(state, [](double v) { histogram.Observe(v); });
}
BENCHMARK(BM_PrometheusCppHistogramObserve)->ThreadRange(1, 8)->UseRealTime();

void BM_RenderRegistry(benchmark::State& state) {
  nibble::metrics::Registry r;
  auto& family =
      r.histogram("nibble_render_latency_seconds", "Bench.", {0.1, 1, 10}, {"model_name"});
  for (int i = 0; i < 50; ++i) family.labels({"model" + std::to_string(i)}).observe(i);
  for (auto _ : state) benchmark::DoNotOptimize(r.render());
}
BENCHMARK(BM_RenderRegistry);

}  // namespace
