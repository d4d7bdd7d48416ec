// ConnectionBudget: which waiting connection gives its worker up, and when none does.
#include <gtest/gtest.h>

#include <thread>

#include "http/connection_budget.h"

namespace nibble::http {
namespace {

using namespace std::chrono_literals;
using Wait = ConnectionBudget::Wait;
using Clock = ConnectionBudget::Clock;

TEST(ConnectionBudget, NothingYieldsWithinTheGraceOrWhileAHandlerRuns) {
  ConnectionBudget budget(2, 1, 1h);
  const auto a = budget.enter("127.0.0.1"), b = budget.enter("127.0.0.1");
  budget.queued();
  EXPECT_FALSE(budget.must_yield(a));
  EXPECT_FALSE(budget.must_yield(b));
  ConnectionBudget no_grace(1, 1, 0ms);
  const auto c = no_grace.enter("127.0.0.1");
  no_grace.set_wait(c, Wait::kNone, Clock::now() - 1h);  // its handler runs
  no_grace.queued();
  EXPECT_FALSE(no_grace.must_yield(c));
}

TEST(ConnectionBudget, TheLongestWaitingYieldsWhenAConnectionNeedsAWorker) {
  ConnectionBudget budget(2, 100, 0ms);
  const auto old = budget.enter("10.0.0.1"), young = budget.enter("10.0.0.2");
  budget.set_wait(old, Wait::kRequest, Clock::now() - 2s);
  budget.set_wait(young, Wait::kIdle, Clock::now() - 1s);
  EXPECT_FALSE(budget.must_yield(old)) << "no connection is queued";
  budget.queued();
  EXPECT_FALSE(budget.must_yield(young));
  EXPECT_TRUE(budget.must_yield(old));
  EXPECT_FALSE(budget.must_yield(old)) << "counted once";
  EXPECT_TRUE(budget.must_yield(young)) << "the next one, while the queue still waits";
  budget.dequeued();
  EXPECT_EQ(budget.yielded(), 2u);
}

TEST(ConnectionBudget, AnAddressOverItsShareLosesItsLongestWaitingConnection) {
  ConnectionBudget budget(100, 2, 0ms);
  const auto now = Clock::now();
  const auto first = budget.enter("127.0.0.2"), second = budget.enter("127.0.0.2"),
             third = budget.enter("127.0.0.2"), neighbour = budget.enter("127.0.0.1");
  budget.set_wait(first, Wait::kRequest, now - 3s);
  budget.set_wait(second, Wait::kRequest, now - 2s);
  budget.set_wait(third, Wait::kRequest, now - 1s);
  budget.set_wait(neighbour, Wait::kRequest, now - 10s);
  EXPECT_FALSE(budget.must_yield(neighbour)) << "another address's share is its own";
  EXPECT_FALSE(budget.must_yield(third));
  EXPECT_TRUE(budget.must_yield(first));
  EXPECT_EQ(budget.waiting("127.0.0.2"), 3);
}

TEST(ConnectionBudget, StoppingClosesIdleConnectionsOnly) {
  ConnectionBudget budget(10, 10, 1h);
  const auto idle = budget.enter("a"), busy = budget.enter("b");
  budget.set_wait(idle, Wait::kIdle, Clock::now());
  budget.set_wait(busy, Wait::kNone, Clock::now());
  budget.stop();
  EXPECT_TRUE(budget.must_yield(idle));
  EXPECT_FALSE(budget.must_yield(busy));
}

}  // namespace
}  // namespace nibble::http
