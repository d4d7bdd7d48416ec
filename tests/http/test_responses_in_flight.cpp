#include "http/responses_in_flight.h"

#include <gtest/gtest.h>

#include <thread>

namespace nibble::http {
namespace {

using namespace std::chrono_literals;

TEST(ResponsesInFlight, WaitsForEveryTokenAndTimesOutWhileOneIsHeld) {
  ResponsesInFlight tracker;
  EXPECT_TRUE(tracker.wait_idle(std::chrono::steady_clock::now()));
  ResponsesInFlight::Token a = tracker.enter();
  ResponsesInFlight::Token b = tracker.enter();
  ResponsesInFlight::Token copy = a;  // a response's state may be shared by several owners
  EXPECT_EQ(tracker.count(), 2);
  a.reset();
  EXPECT_EQ(tracker.count(), 2) << "a copy still holds the first response";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(tracker.wait_idle(start + 50ms));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 50ms);
  copy.reset();
  EXPECT_EQ(tracker.count(), 1);
  std::thread writer([&] {
    std::this_thread::sleep_for(30ms);
    b.reset();
  });
  EXPECT_TRUE(tracker.wait_idle(std::chrono::steady_clock::now() + 10s));
  EXPECT_EQ(tracker.count(), 0);
  writer.join();
}

TEST(ResponsesInFlight, ATokenMayOutliveItsTracker) {
  ResponsesInFlight::Token token;
  {
    ResponsesInFlight tracker;
    token = tracker.enter();
  }
  token.reset();  // must not touch freed memory (ASan in NIBBLE_SANITIZE builds)
  SUCCEED();
}

}  // namespace
}  // namespace nibble::http
