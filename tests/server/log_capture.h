#pragma once
// Captures what spdlog's default logger writes (the messages, one per line) while alive, then
// puts the previous logger back. Create it before the threads that log start, destroy it after
// they stop: spdlog's default logger is process-wide.
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace nibble::testing {

class LogCapture {
 public:
  explicit LogCapture(spdlog::level::level_enum level = spdlog::level::info)
      : previous_(spdlog::default_logger()), sink_(std::make_shared<Sink>()) {
    auto logger = std::make_shared<spdlog::logger>("capture", sink_);
    logger->set_level(level);
    spdlog::set_default_logger(logger);
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // Every line so far, each prefixed by its level ("info: ...").
  std::vector<std::string> lines() const { return sink_->lines(); }
  std::string text() const {
    std::string all;
    for (const std::string& line : lines()) all += line + "\n";
    return all;
  }
  // The first line containing `needle`, waiting up to `limit` for it ("" if none came).
  std::string wait_for(const std::string& needle,
                       std::chrono::milliseconds limit = std::chrono::seconds(5)) const {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    do {
      for (const std::string& line : lines()) {
        if (line.find(needle) != std::string::npos) return line;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } while (std::chrono::steady_clock::now() < deadline);
    return "";
  }

 private:
  class Sink : public spdlog::sinks::base_sink<std::mutex> {
   public:
    std::vector<std::string> lines() {
      std::lock_guard lock(mutex_);
      return lines_;
    }

   protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
      const auto level = spdlog::level::to_string_view(msg.level);
      lines_.push_back(std::string(level.data(), level.size()) + ": " +
                       std::string(msg.payload.data(), msg.payload.size()));
    }
    void flush_() override {}

   private:
    std::vector<std::string> lines_;
  };

  std::shared_ptr<spdlog::logger> previous_;
  std::shared_ptr<Sink> sink_;
};

}  // namespace nibble::testing
