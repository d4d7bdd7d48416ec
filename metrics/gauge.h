#pragma once
// A value that goes up and down (Prometheus gauge): a handle on a prometheus::Gauge owned by
// the registry. All operations are lock-free.
#include <prometheus/gauge.h>

namespace nibble::metrics {

class Gauge {
 public:
  explicit Gauge(prometheus::Gauge& gauge) : gauge_(gauge) {}

  void set(double value) { gauge_.Set(value); }
  void inc(double amount = 1.0) { gauge_.Increment(amount); }
  void dec(double amount = 1.0) { gauge_.Decrement(amount); }
  double value() const { return gauge_.Value(); }

 private:
  prometheus::Gauge& gauge_;
};

}  // namespace nibble::metrics
