#include "tools/bench/bench_runner.h"

#include <httplib.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <semaphore>
#include <thread>

#include "tools/bench/bench_request.h"
#include "tools/bench/server_metrics.h"

namespace nibble::bench {
namespace {

void draw_progress(int done, int total) {
  const int width = 40;
  const int filled = total ? done * width / total : width;
  std::fprintf(stderr, "\r  [%s%s] %d/%d", std::string(std::size_t(filled), '=').c_str(),
               std::string(std::size_t(width - filled), ' ').c_str(), done, total);
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

}  // namespace

std::string first_model(const BenchOptions& o) {
  httplib::Client client(o.base_url);
  client.set_connection_timeout(5, 0);
  httplib::Headers headers;
  if (!o.api_key.empty()) headers.emplace("Authorization", "Bearer " + o.api_key);
  auto res = client.Get("/v1/models", headers);
  if (!res || res->status != 200) {
    throw std::runtime_error(
        "cannot list models at " + o.base_url + "/v1/models" +
        (res ? " (HTTP " + std::to_string(res->status) + ")" : " (no answer)"));
  }
  auto body = nlohmann::json::parse(res->body, nullptr, false);
  if (!body.is_object() || body["data"].empty())
    throw std::runtime_error("the server lists no models");
  return body["data"][0]["id"];
}

RunSummary run_benchmark(const BenchOptions& o, const Dataset& dataset, int concurrency) {
  std::vector<RequestResult> results(dataset.prompts.size());
  std::counting_semaphore<1 << 20> slots(concurrency);
  std::mt19937_64 arrivals(o.seed + 1);
  std::exponential_distribution<double> gap(o.request_rate > 0 ? o.request_rate : 1.0);
  std::atomic<int> done{0};
  std::mutex progress_mutex;
  std::vector<std::thread> threads;
  const std::string metrics_before = scrape_metrics(o);
  const Clock::time_point start = Clock::now();
  for (std::size_t i = 0; i < dataset.prompts.size(); ++i) {
    if (o.request_rate > 0 && i > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(gap(arrivals)));
    }
    slots.acquire();
    threads.emplace_back([&, i] {
      results[i] = send_request(o, dataset.prompts[i], start);
      slots.release();
      const int finished = ++done;
      if (o.progress) {
        std::lock_guard lock(progress_mutex);
        draw_progress(finished, int(dataset.prompts.size()));
      }
    });
  }
  for (auto& t : threads) t.join();
  const double duration = std::chrono::duration<double>(Clock::now() - start).count();
  RunSummary summary = summarize(concurrency, o.request_rate, results, duration);
  summary.spec_decode = spec_decode_between(metrics_before, scrape_metrics(o));
  return summary;
}

}  // namespace nibble::bench
