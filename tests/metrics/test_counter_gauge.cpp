#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "metrics/metrics_error.h"
#include "metrics/registry.h"

namespace nibble::metrics {
namespace {

TEST(Counter, StartsAtZeroAndAdds) {
  Registry r;
  Counter& c = r.counter("nibble_test_events_total", "Events.").labels({});
  EXPECT_EQ(c.value(), 0.0);
  c.inc();
  c.inc(2.5);
  EXPECT_DOUBLE_EQ(c.value(), 3.5);
}

TEST(Counter, RejectsNegativeAndNaNIncrements) {
  Registry r;
  Counter& c = r.counter("nibble_test_events_total", "Events.").labels({});
  c.inc(1);
  EXPECT_THROW(c.inc(-1), MetricsError);
  EXPECT_THROW(c.inc(std::nan("")), MetricsError);
  EXPECT_EQ(c.value(), 1.0);
}

TEST(Counter, ConcurrentIncrementsAreNotLost) {
  Registry r;
  Counter& c = r.counter("nibble_test_events_total", "Events.").labels({});
  constexpr int kThreads = 8, kPerThread = 100000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) c.inc();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), double(kThreads) * kPerThread);
}

TEST(Gauge, SetIncDec) {
  Registry r;
  Gauge& g = r.gauge("nibble_test_level", "Level.").labels({});
  g.set(10);
  g.inc(2);
  g.dec(5);
  EXPECT_DOUBLE_EQ(g.value(), 7.0);
  g.set(-3.25);
  EXPECT_DOUBLE_EQ(g.value(), -3.25);
}

TEST(Gauge, ConcurrentIncDecBalances) {
  Registry r;
  Gauge& g = r.gauge("nibble_test_level", "Level.").labels({});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50000; ++i) (t % 2 == 0) ? g.inc() : g.dec();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(g.value(), 0.0);
}

}  // namespace
}  // namespace nibble::metrics
