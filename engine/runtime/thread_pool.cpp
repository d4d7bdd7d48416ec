#include "engine/runtime/thread_pool.h"

#include <algorithm>

namespace nibble::runtime {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(threads, 1); ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::work_on(const Job& job) {
  if (!job.fn) return;
  for (;;) {
    std::int64_t begin = next_.fetch_add(job.chunk);
    if (begin >= job.count) return;
    (*job.fn)(begin, std::min(job.count, begin + job.chunk));
  }
}

void ThreadPool::worker_loop() {
  std::uint64_t seen = 0;
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;  // read under the lock: a late waker sees either this job or none
      ++busy_;
    }
    work_on(job);
    {
      std::lock_guard lock(mutex_);
      --busy_;
    }
    done_.notify_one();
  }
}

void ThreadPool::parallel_for(std::int64_t count,
                              const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (count <= 0) return;
  if (workers_.empty() || count == 1) {
    fn(0, count);
    return;
  }
  Job job{&fn, count, std::max<std::int64_t>(1, count / (4 * size()))};
  {
    std::lock_guard lock(mutex_);
    job_ = job;
    next_ = 0;
    ++generation_;
  }
  wake_.notify_all();
  work_on(job);
  // Workers that woke for this generation finish their chunks; late wakers find no work left.
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return busy_ == 0; });
  job_ = Job{};
}

}  // namespace nibble::runtime
