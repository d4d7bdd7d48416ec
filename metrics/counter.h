#pragma once
// A monotonically increasing value (Prometheus counter). inc() is lock-free and cheap
// under contention; negative or NaN increments are rejected because they would break rate().
#include "metrics/striped_cell.h"

namespace nibble::metrics {

class Counter {
 public:
  void inc(double amount = 1.0);
  double value() const { return total_.sum(); }

 private:
  StripedCell<double> total_;
};

}  // namespace nibble::metrics
