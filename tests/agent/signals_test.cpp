// The agent's signals, raised for real in this process: SIGTERM and SIGINT ask it to stop;
// SIGHUP, SIGUSR1 and SIGUSR2 are only noted (once each however often they came); SIGPIPE is
// ignored.
#include "agent/signals.h"

#include <atomic>
#include <csignal>
#include <vector>

#include <gtest/gtest.h>

namespace fragscope::agent {
namespace {

TEST(Signals, StopSignalsSetTheFlagAndTheOthersAreNotedOnce) {
  std::atomic<bool> stop{false};
  install_agent_signal_handlers(stop);
  EXPECT_TRUE(take_ignored_signals().empty());
  ASSERT_EQ(std::raise(SIGUSR2), 0);
  ASSERT_EQ(std::raise(SIGHUP), 0);
  ASSERT_EQ(std::raise(SIGHUP), 0);
  ASSERT_EQ(std::raise(SIGPIPE), 0);  // would end the process by default
  EXPECT_FALSE(stop.load());
  EXPECT_EQ(take_ignored_signals(), (std::vector<int>{SIGHUP, SIGUSR2}));
  EXPECT_TRUE(take_ignored_signals().empty());  // taken
  ASSERT_EQ(std::raise(SIGTERM), 0);
  EXPECT_TRUE(stop.load());
  stop = false;
  ASSERT_EQ(std::raise(SIGINT), 0);
  EXPECT_TRUE(stop.load());
}

TEST(Signals, NamesOfTheNotedSignals) {
  EXPECT_EQ(signal_name(SIGHUP), "SIGHUP");
  EXPECT_EQ(signal_name(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(signal_name(SIGUSR2), "SIGUSR2");
  EXPECT_EQ(signal_name(SIGTERM), "signal " + std::to_string(SIGTERM));
}

}  // namespace
}  // namespace fragscope::agent
