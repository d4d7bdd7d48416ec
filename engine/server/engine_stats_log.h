#pragma once
// The engine's periodic stats line (serve --log-stats-interval, vLLM's "Avg prompt throughput"
// line), from the engine's own metrics (runtime::EngineMetrics) every interval:
//   engine: Avg prompt throughput: 512.0 tokens/s, Avg generation throughput: 80.3 tokens/s,
//   Running: 3 reqs, Waiting: 0 reqs, KV cache usage: 12.5%, Prefix cache hit rate: 40.0%
// Throughputs and the hit rate are over the interval; the rest as at its end. As vLLM does, an
// interval is logged at info when it or the one before it had tokens (so that the line showing
// the engine went idle is seen) or a request was running or waiting, otherwise at debug.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "engine/runtime/engine_metrics.h"
#include "metrics/registry.h"

namespace nibble::server {

// The metrics the line is made of, read at one moment.
struct EngineStatsSample {
  std::chrono::steady_clock::time_point at;
  double prompt_tokens = 0;      // counters since start
  double generation_tokens = 0;  //
  double prefix_queries = 0;     //
  double prefix_hits = 0;        //
  int running = 0;               // requests, now
  int waiting = 0;               //
  double kv_cache_usage = 0;     // 0 to 1, now
};

EngineStatsSample sample_engine_stats(const runtime::EngineMetrics& metrics);

struct EngineStatsLine {
  std::string text;
  bool had_tokens = false;  // the interval processed or generated tokens
  bool busy = false;        // a request was running or waiting at its end
};

EngineStatsLine engine_stats_line(const EngineStatsSample& previous, const EngineStatsSample& now);

class EngineStatsLog {
 public:
  // Reads the series of `model_name` in `registry` (the engine's, made with the same
  // max_model_len) every `interval` on its own thread; an interval of 0 logs nothing.
  EngineStatsLog(metrics::Registry& registry, const std::string& model_name, int max_model_len,
                 std::chrono::milliseconds interval);
  ~EngineStatsLog();  // stops the thread
  EngineStatsLog(const EngineStatsLog&) = delete;
  EngineStatsLog& operator=(const EngineStatsLog&) = delete;

 private:
  void run();

  runtime::EngineMetrics metrics_;
  std::chrono::milliseconds interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace nibble::server
