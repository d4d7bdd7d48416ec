// Autoscaling decisions: up at once, down after the delay, to zero after idling, bounds held.
#include <gtest/gtest.h>

#include "controller/autoscaler/autoscaler.h"

namespace nibble::autoscaler {
namespace {

using namespace std::chrono_literals;
const Clock::time_point t0 = Clock::time_point{} + 100h;

recipe::ModelRecipe recipe_with(int min, int max) {
  recipe::ModelRecipe r;
  r.replicas = {min, max};
  r.autoscaling.target_per_replica = 8;
  r.autoscaling.scale_down_delay_seconds = 60;
  r.autoscaling.idle_seconds_before_zero = 300;
  return r;
}

TEST(Autoscaler, ScalesUpAtOnceAndClampsToMax) {
  const auto r = recipe_with(1, 4);
  ScaleState s;
  EXPECT_EQ(decide(r, {.inflight = 0, .last_request = t0}, s, t0).desired, 1);
  EXPECT_EQ(decide(r, {.inflight = 17, .last_request = t0}, s, t0).desired, 3);  // ceil(17/8)
  EXPECT_EQ(decide(r, {.inflight = 500, .last_request = t0}, s, t0).desired, 4);
}

// autoscaling.enabled false: spec.replicas.desired (kubectl scale, an HPA) holds, clamped to
// [min, max], whatever the load; unset, min.
TEST(Autoscaler, DisabledFollowsReplicasDesiredClampedToBounds) {
  auto r = recipe_with(1, 4);
  r.autoscaling.enabled = false;
  r.replicas.desired = 3;
  ScaleState s;
  Decision d = decide(r, {.inflight = 500, .last_request = t0}, s, t0);
  EXPECT_EQ(d.desired, 3);
  EXPECT_NE(d.reason.find("stands aside"), std::string::npos) << d.reason;
  EXPECT_EQ(decide(r, {.inflight = 0, .last_request = {}}, s, t0 + 10000s).desired, 3);
  r.replicas.desired = 9;
  EXPECT_EQ(decide(r, {.inflight = 0, .last_request = t0}, s, t0).desired, 4);
  r.replicas.desired = 0;
  EXPECT_EQ(decide(r, {.inflight = 500, .last_request = t0}, s, t0).desired, 1);
  r.replicas.desired.reset();
  d = decide(r, {.inflight = 500, .last_request = t0}, s, t0);
  EXPECT_EQ(d.desired, 1);
  EXPECT_NE(d.reason.find("unset"), std::string::npos) << d.reason;
  // On again: the autoscaler decides from the load, starting from what was held.
  r.autoscaling.enabled = true;
  EXPECT_EQ(decide(r, {.inflight = 17, .last_request = t0}, s, t0).desired, 3);
}

// Enabled, spec.replicas.desired is the count the autoscaler last published: a restarted
// controller resumes from it (no drop to min and climb back), then follows the load.
TEST(Autoscaler, EnabledResumesFromThePublishedCount) {
  auto r = recipe_with(1, 4);
  r.replicas.desired = 3;
  ScaleState s;
  Decision d = decide(r, {.inflight = 2, .last_request = t0}, s, t0);
  EXPECT_EQ(d.desired, 3);  // lower load, but the scale-down delay starts now
  EXPECT_EQ(d.reason.find("stands aside"), std::string::npos) << d.reason;
  EXPECT_EQ(decide(r, {.inflight = 2, .last_request = t0}, s, t0 + 61s).desired, 1);
  EXPECT_EQ(decide(r, {.inflight = 30, .last_request = t0}, s, t0 + 62s).desired, 4);
  ScaleState fresh;
  r.replicas.desired = 9;  // out of bounds: clamped
  EXPECT_EQ(decide(r, {.inflight = 30, .last_request = t0}, fresh, t0).desired, 4);
}

TEST(Autoscaler, ScalesDownOnlyAfterTheDelay) {
  const auto r = recipe_with(1, 4);
  ScaleState s;
  decide(r, {.inflight = 30, .last_request = t0}, s, t0);
  EXPECT_EQ(s.desired, 4);
  EXPECT_EQ(decide(r, {.inflight = 2, .last_request = t0}, s, t0 + 1s).desired, 4);
  EXPECT_EQ(decide(r, {.inflight = 2, .last_request = t0}, s, t0 + 50s).desired, 4);
  const Decision d = decide(r, {.inflight = 2, .last_request = t0}, s, t0 + 61s);
  EXPECT_EQ(d.desired, 1);
  EXPECT_NE(d.reason.find("scale down"), std::string::npos) << d.reason;
  // A burst in the middle restarts the wait.
  decide(r, {.inflight = 30, .last_request = t0}, s, t0 + 70s);
  decide(r, {.inflight = 0, .last_request = t0 + 70s}, s, t0 + 71s);
  EXPECT_EQ(decide(r, {.inflight = 9, .last_request = t0 + 70s}, s, t0 + 100s).desired, 4);
}

TEST(Autoscaler, ScalesToZeroOnlyAfterIdlingAndWakesOnDemand) {
  const auto r = recipe_with(0, 2);
  ScaleState s;
  decide(r, {.inflight = 3, .last_request = t0}, s, t0);
  EXPECT_EQ(s.desired, 1);
  EXPECT_EQ(decide(r, {.last_request = t0}, s, t0 + 200s).desired, 1) << "not idle long enough";
  decide(r, {.last_request = t0}, s, t0 + 301s);  // idle: the lower load starts its delay
  EXPECT_EQ(decide(r, {.last_request = t0}, s, t0 + 362s).desired, 0);
  EXPECT_EQ(decide(r, {.demand = true}, s, t0 + 400s).desired, 1) << "a held request wakes it";
}

TEST(Autoscaler, KvCacheUsageIsAPerReplicaMean) {
  auto r = recipe_with(1, 8);
  r.autoscaling.metric = "kv_cache_usage";
  r.autoscaling.target_per_replica = 0.5;
  ScaleState s;
  s.desired = 2;
  EXPECT_EQ(decide(r, {.kv_cache_usage = 0.9, .last_request = t0}, s, t0).desired,
            4);  // 2 * 0.9 / 0.5
}

}  // namespace
}  // namespace nibble::autoscaler
