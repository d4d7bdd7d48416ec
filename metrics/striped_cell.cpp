#include "metrics/striped_cell.h"

namespace nibble::metrics {

std::size_t this_thread_stripe() {
  static std::atomic<std::size_t> next_stripe{0};
  thread_local const std::size_t stripe =
      next_stripe.fetch_add(1, std::memory_order_relaxed) % kStripeCount;
  return stripe;
}

}  // namespace nibble::metrics
