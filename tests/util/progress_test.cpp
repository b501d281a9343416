#include "util/progress.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

namespace fragscope {
namespace {

TEST(ProgressCounterTest, AnnouncesTheTaskThenSumsWhatEveryThreadAdds) {
  std::mutex mutex;
  std::vector<ProgressTick> ticks;
  std::vector<std::string> tasks;
  const Progress progress = [&](const ProgressTick& t) {
    const std::lock_guard lock(mutex);
    ticks.push_back(t);
    tasks.emplace_back(t.task);
  };
  ProgressCounter counter(progress, "replaying x", "events", 4000);
  ASSERT_EQ(ticks.size(), 1u);
  EXPECT_EQ(ticks[0].done, 0u);
  EXPECT_EQ(ticks[0].total, 4000u);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) counter.add(10);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ticks.size(), 401u);
  std::uint64_t most = 0;
  for (const ProgressTick& t : ticks) most = std::max(most, t.done);
  EXPECT_EQ(most, 4000u);
  for (const std::string& task : tasks) EXPECT_EQ(task, "replaying x");
}

TEST(ProgressCounterTest, NeverReportsMoreThanTheTotal) {
  std::vector<std::uint64_t> done;
  const Progress progress = [&](const ProgressTick& t) { done.push_back(t.done); };
  ProgressCounter counter(progress, "t", "events", 10);
  counter.add(7);
  counter.add(7);
  EXPECT_EQ(done, (std::vector<std::uint64_t>{0, 7, 10}));
}

TEST(ProgressCounterTest, WithoutAListenerCountsNothing) {
  // An empty std::function throws bad_function_call when called: the counter must not call it, neither to announce
  // the task nor to add.
  const Progress none;
  EXPECT_NO_THROW({
    ProgressCounter counter(none, "t", "events", 10);
    counter.add(5);
    counter.add(10);
  });
}

}  // namespace
}  // namespace fragscope
