#pragma once
// Where a step's GPU time goes, when on (CudaOptions::step_timing): CUDA events between the
// phases of the forward pass, summed per phase and logged every `every` steps (and at exit). Off
// by default: the events cost a few microseconds per phase.
#include <cuda_runtime.h>
#include <spdlog/spdlog.h>

#include <map>
#include <string>
#include <vector>

namespace nibble::backend::cuda {

class StepTimer {
 public:
  StepTimer(cudaStream_t stream, bool on, int every = 100)
      : on_(on), stream_(stream), every_(every) {}
  ~StepTimer() {
    report();
    for (auto& [name, e] : marks_) cudaEventDestroy(e);
    for (cudaEvent_t e : pool_) cudaEventDestroy(e);
  }
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;

  // The time since the previous mark of this step belongs to `phase`.
  void mark(const char* phase) {
    if (!on_) return;
    cudaEvent_t e;
    if (!pool_.empty()) {
      e = pool_.back();
      pool_.pop_back();
    } else if (cudaEventCreate(&e) != cudaSuccess) {
      return;
    }
    cudaEventRecord(e, stream_);
    marks_.push_back({phase, e});
  }
  // After the step's stream synchronisation: fold the marks into the totals.
  void end_step(long tokens) {
    if (!on_) return;
    for (std::size_t i = 1; i < marks_.size(); ++i) {
      float ms = 0;
      cudaEventElapsedTime(&ms, marks_[i - 1].second, marks_[i].second);
      total_ms_[marks_[i].first] += ms;
    }
    for (auto& [name, e] : marks_) pool_.push_back(e);
    marks_.clear();
    ++steps_;
    tokens_ += tokens;
    if (steps_ % every_ == 0) report();
  }

 private:
  void report() {
    if (!on_ || steps_ == 0) return;
    double sum = 0;
    for (auto& [name, ms] : total_ms_) sum += ms;
    std::string parts;
    for (auto& [name, ms] : total_ms_)
      parts += fmt::format(" {} {:.3f} ms ({:.0f}%)", name, ms / double(steps_), 100 * ms / sum);
    spdlog::info("cuda timing over {} steps ({:.1f} tokens/step): {:.3f} ms/step:{}", steps_,
                 double(tokens_) / double(steps_), sum / double(steps_), parts);
    total_ms_.clear();
    steps_ = 0;
    tokens_ = 0;
  }

  bool on_;
  cudaStream_t stream_;
  int every_;
  std::vector<std::pair<std::string, cudaEvent_t>> marks_;
  std::vector<cudaEvent_t> pool_;
  std::map<std::string, double> total_ms_;
  long steps_ = 0, tokens_ = 0;
};

}  // namespace nibble::backend::cuda
