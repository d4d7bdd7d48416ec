#include "engine/server/engine_stats_log.h"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

namespace nibble::server {

EngineStatsSample sample_engine_stats(const runtime::EngineMetrics& m) {
  EngineStatsSample s;
  s.at = std::chrono::steady_clock::now();
  s.prompt_tokens = m.prompt_tokens.value();
  s.generation_tokens = m.generation_tokens.value();
  s.prefix_queries = m.prefix_cache_queries.value();
  s.prefix_hits = m.prefix_cache_hits.value();
  s.running = int(m.requests_running.value());
  s.waiting = int(m.requests_waiting.value());
  s.kv_cache_usage = m.kv_cache_usage_ratio.value();
  return s;
}

EngineStatsLine engine_stats_line(const EngineStatsSample& previous, const EngineStatsSample& now) {
  const double seconds = std::chrono::duration<double>(now.at - previous.at).count();
  const double prompt = now.prompt_tokens - previous.prompt_tokens;
  const double generated = now.generation_tokens - previous.generation_tokens;
  const double queries = now.prefix_queries - previous.prefix_queries;
  const double hits = now.prefix_hits - previous.prefix_hits;
  auto per_second = [&](double tokens) { return seconds > 0 ? tokens / seconds : 0.0; };
  EngineStatsLine line;
  line.text = fmt::format(
      "engine: Avg prompt throughput: {:.1f} tokens/s, Avg generation throughput: {:.1f} "
      "tokens/s, Running: {} reqs, Waiting: {} reqs, KV cache usage: {:.1f}%, Prefix cache hit "
      "rate: {:.1f}%",
      per_second(prompt), per_second(generated), now.running, now.waiting, now.kv_cache_usage * 100,
      queries > 0 ? hits / queries * 100 : 0.0);
  line.had_tokens = prompt > 0 || generated > 0;
  line.busy = now.running > 0 || now.waiting > 0;
  return line;
}

EngineStatsLog::EngineStatsLog(metrics::Registry& registry, const std::string& model_name,
                               int max_model_len, std::chrono::milliseconds interval)
    : metrics_(registry, model_name, max_model_len), interval_(interval) {
  if (interval_.count() > 0) thread_ = std::thread([this] { run(); });
}

EngineStatsLog::~EngineStatsLog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EngineStatsLog::run() {
  EngineStatsSample previous = sample_engine_stats(metrics_);
  bool previous_had_tokens = false;
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, interval_, [this] { return stopping_; })) {
    const EngineStatsSample now = sample_engine_stats(metrics_);
    const EngineStatsLine line = engine_stats_line(previous, now);
    // Idle production engines stay quiet; the first idle interval still shows the zeros.
    const bool worth_info = line.had_tokens || previous_had_tokens || line.busy;
    spdlog::log(worth_info ? spdlog::level::info : spdlog::level::debug, "{}", line.text);
    previous = now;
    previous_had_tokens = line.had_tokens;
  }
}

}  // namespace nibble::server
