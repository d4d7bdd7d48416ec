// Hot-path cost of metric updates, single-threaded and under contention from 2-8 threads
// hammering the same child metric. Reported in docs/performance.md.
#include <benchmark/benchmark.h>

#include "metrics/registry.h"

namespace {

nibble::metrics::Registry& registry() {
  static nibble::metrics::Registry r;
  return r;
}

void BM_CounterInc(benchmark::State& state) {
  static auto& counter =
      registry().counter("bench_requests_total", "Bench.", {"model_name"}).labels({"m"});
  for (auto _ : state) counter.inc();
}
BENCHMARK(BM_CounterInc)->ThreadRange(1, 8)->UseRealTime();

void BM_GaugeInc(benchmark::State& state) {
  static auto& gauge = registry().gauge("bench_running", "Bench.", {"model_name"}).labels({"m"});
  for (auto _ : state) gauge.inc();
}
BENCHMARK(BM_GaugeInc)->ThreadRange(1, 8)->UseRealTime();

void BM_HistogramObserve(benchmark::State& state) {
  static auto& histogram = registry()
                               .histogram("bench_latency_seconds", "Bench.",
                                          {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25,
                                           0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0},
                                          {"model_name"})
                               .labels({"m"});
  double v = 0.0;
  for (auto _ : state) {
    histogram.observe(v);
    v = v > 50 ? 0.0 : v + 0.37;
  }
}
BENCHMARK(BM_HistogramObserve)->ThreadRange(1, 8)->UseRealTime();

void BM_RenderRegistry(benchmark::State& state) {
  nibble::metrics::Registry r;
  auto& family = r.histogram("render_latency_seconds", "Bench.", {0.1, 1, 10}, {"model_name"});
  for (int i = 0; i < 50; ++i) family.labels({"model" + std::to_string(i)}).observe(i);
  for (auto _ : state) benchmark::DoNotOptimize(r.render());
}
BENCHMARK(BM_RenderRegistry);

}  // namespace
