// The work queue: de-duplication, one worker per key, per-key exponential back-off, delays.
#include <gtest/gtest.h>

#include <thread>

#include "controller/kube/work_queue.h"

namespace nibble::kube {
namespace {

using std::chrono::milliseconds;

TEST(WorkQueue, DeduplicatesQueuedKeysInOrder) {
  WorkQueue q;
  q.add("ns/a");
  q.add("ns/b");
  q.add("ns/a");
  EXPECT_EQ(q.length(), 2u);
  EXPECT_EQ(q.get(), "ns/a");
  EXPECT_EQ(q.get(), "ns/b");
  EXPECT_EQ(q.length(), 0u);
}

TEST(WorkQueue, AKeyAddedWhileInProcessIsQueuedAgainOnDone) {
  WorkQueue q;
  q.add("ns/a");
  ASSERT_EQ(q.get(), "ns/a");
  q.add("ns/a");  // an event arrives while a worker reconciles it
  q.add("ns/a");
  EXPECT_EQ(q.length(), 0u);  // not handed to a second worker
  q.done("ns/a");
  EXPECT_EQ(q.length(), 1u);  // once, not twice
  EXPECT_EQ(q.get(), "ns/a");
  q.done("ns/a");
  EXPECT_EQ(q.length(), 0u);
}

TEST(WorkQueue, RateLimitedBackOffDoublesPerKeyAndForgetResetsIt) {
  WorkQueue q({milliseconds(10), milliseconds(80)});
  EXPECT_EQ(q.next_delay("ns/a"), milliseconds(10));
  const auto start = std::chrono::steady_clock::now();
  q.add_rate_limited("ns/a");
  EXPECT_EQ(q.length(), 0u);  // not yet due
  EXPECT_EQ(q.get(), "ns/a");
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(10));
  q.done("ns/a");
  for (int i = 0; i < 5; ++i) q.add_rate_limited("ns/a");
  EXPECT_EQ(q.failures("ns/a"), 6);
  EXPECT_EQ(q.next_delay("ns/a"), milliseconds(80));  // capped
  EXPECT_EQ(q.next_delay("ns/b"), milliseconds(10));  // per key
  q.forget("ns/a");
  EXPECT_EQ(q.failures("ns/a"), 0);
  EXPECT_EQ(q.next_delay("ns/a"), milliseconds(10));
}

TEST(WorkQueue, AddAfterWaitsAndShutDownWakesWaiters) {
  WorkQueue q;
  q.add_after("ns/later", milliseconds(40));
  q.add("ns/now");
  EXPECT_EQ(q.get(), "ns/now");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(q.get(), "ns/later");
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(30));

  std::optional<std::string> got = "unset";
  std::thread waiter([&] { got = q.get(); });
  std::this_thread::sleep_for(milliseconds(20));
  q.shut_down();
  waiter.join();
  EXPECT_EQ(got, std::nullopt);
  q.add("ns/x");  // ignored after shut down
  EXPECT_EQ(q.length(), 0u);
}

}  // namespace
}  // namespace nibble::kube
