#pragma once
// Polls a condition until it holds or the limit passes (the API-server double and the
// controller's threads act asynchronously); returns the condition's last value.
#include <chrono>
#include <thread>

namespace nibble::kube::testing {

template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::milliseconds(8000)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

}  // namespace nibble::kube::testing
