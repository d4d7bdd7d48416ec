#pragma once
// A fixed pool of worker threads for data-parallel loops; the calling thread works too. Used by
// the CPU backend (its matrix products) and the engine loop (structured-output token masks).
// parallel_for is not reentrant: call it from one thread at a time, not from inside fn.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace nibble::runtime {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads >= 1 (counting the caller)
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }
  // Calls fn(begin, end) on disjoint chunks covering [0, count); returns when all are done.
  void parallel_for(std::int64_t count, const std::function<void(std::int64_t, std::int64_t)>& fn);

 private:
  struct Job {
    const std::function<void(std::int64_t, std::int64_t)>* fn = nullptr;
    std::int64_t count = 0, chunk = 1;
  };
  void work_on(const Job& job);
  void worker_loop();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
  int busy_ = 0;
  Job job_;  // the current job; guarded by mutex_
  std::atomic<std::int64_t> next_{0};
};

}  // namespace nibble::runtime
