#pragma once
// A value that goes up and down (Prometheus gauge). All operations are lock-free.
#include <atomic>

namespace nibble::metrics {

class Gauge {
 public:
  void set(double value) { value_.store(value, std::memory_order_relaxed); }
  void inc(double amount = 1.0) { add(amount); }
  void dec(double amount = 1.0) { add(-amount); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  void add(double delta) {
    double current = value_.load(std::memory_order_relaxed);
    while (!value_.compare_exchange_weak(current, current + delta, std::memory_order_relaxed)) {
    }
  }
  std::atomic<double> value_{0.0};
};

}  // namespace nibble::metrics
