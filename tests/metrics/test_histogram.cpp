#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "metrics/histogram.h"
#include "metrics/metrics_error.h"

namespace nibble::metrics {
namespace {

TEST(Histogram, CumulativeBucketsUseLessOrEqual) {
  Histogram h({1, 2, 5});
  for (double v : {0.5, 1.0, 1.5, 2.0, 4.0, 5.0, 7.0}) h.observe(v);
  const HistogramSnapshot s = h.snapshot();
  ASSERT_EQ(s.cumulative.size(), 4u);
  EXPECT_EQ(s.cumulative[0], 2u);  // 0.5, 1.0
  EXPECT_EQ(s.cumulative[1], 4u);  // + 1.5, 2.0
  EXPECT_EQ(s.cumulative[2], 6u);  // + 4.0, 5.0
  EXPECT_EQ(s.cumulative[3], 7u);  // + 7.0 in +Inf
  EXPECT_EQ(s.count(), 7u);
  EXPECT_DOUBLE_EQ(s.sum, 21.0);
}

TEST(Histogram, NegativeAndHugeValues) {
  Histogram h({0});
  h.observe(-10);
  h.observe(1e300);
  const HistogramSnapshot s = h.snapshot();
  EXPECT_EQ(s.cumulative[0], 1u);
  EXPECT_EQ(s.cumulative[1], 2u);
}

TEST(Histogram, RejectsBadBounds) {
  EXPECT_THROW(Histogram({}), MetricsError);
  EXPECT_THROW(Histogram({1, 1}), MetricsError);
  EXPECT_THROW(Histogram({2, 1}), MetricsError);
  EXPECT_THROW(Histogram({1, std::numeric_limits<double>::infinity()}), MetricsError);
  EXPECT_THROW(Histogram({std::nan("")}), MetricsError);
}

TEST(Histogram, BucketHelpers) {
  EXPECT_EQ(linear_buckets(1, 2, 3), (std::vector<double>{1, 3, 5}));
  EXPECT_EQ(exponential_buckets(0.5, 2, 4), (std::vector<double>{0.5, 1, 2, 4}));
  EXPECT_THROW(exponential_buckets(0, 2, 3), MetricsError);
  EXPECT_THROW(linear_buckets(0, 0, 3), MetricsError);
}

TEST(Histogram, ConcurrentObservationsAreCountedOnce) {
  Histogram h({10, 100});
  constexpr int kThreads = 6, kPerThread = 40000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) h.observe(t * 20.0);  // 0,20,...,100
    });
  }
  for (auto& t : threads) t.join();
  const HistogramSnapshot s = h.snapshot();
  EXPECT_EQ(s.cumulative[0], std::uint64_t(kPerThread));             // t = 0
  EXPECT_EQ(s.cumulative[1], std::uint64_t(kThreads) * kPerThread);  // all <= 100
  EXPECT_EQ(s.count(), std::uint64_t(kThreads) * kPerThread);
  EXPECT_DOUBLE_EQ(s.sum, kPerThread * 20.0 * (0 + 1 + 2 + 3 + 4 + 5));
}

}  // namespace
}  // namespace nibble::metrics
