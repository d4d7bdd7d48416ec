#pragma once
// Contention-free accumulation for the hot path: each thread adds into one of several
// cache-line-sized atomic slots (picked once per thread), and a read sums the slots.
// An add never takes a lock and two threads rarely share a cache line.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace nibble::metrics {

inline constexpr std::size_t kStripeCount = 8;

// The stripe this thread writes to; threads are dealt stripes round-robin.
std::size_t this_thread_stripe();

template <typename T>
class StripedCell {
 public:
  void add(T delta) {
    Slot& slot = slots_[this_thread_stripe()];
    if constexpr (std::is_integral_v<T>) {
      slot.value.fetch_add(delta, std::memory_order_relaxed);
    } else {
      // One writer per stripe in the common case, so this loop almost never retries.
      T current = slot.value.load(std::memory_order_relaxed);
      while (
          !slot.value.compare_exchange_weak(current, current + delta, std::memory_order_relaxed)) {
      }
    }
  }

  T sum() const {
    T total{};
    for (const Slot& slot : slots_) total += slot.value.load(std::memory_order_relaxed);
    return total;
  }

 private:
  struct alignas(64) Slot {
    std::atomic<T> value{};
  };
  std::array<Slot, kStripeCount> slots_;
};

}  // namespace nibble::metrics
