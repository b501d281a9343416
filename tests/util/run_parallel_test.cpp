#include "util/run_parallel.h"

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace fragscope {
namespace {

std::vector<std::function<void()>> counting_tasks(std::vector<std::atomic<int>>& runs) {
  std::vector<std::function<void()>> tasks;
  for (std::size_t i = 0; i < runs.size(); ++i) tasks.emplace_back([&runs, i] { ++runs[i]; });
  return tasks;
}

TEST(RunParallel, RunsEveryTaskExactlyOnce) {
  for (const unsigned threads : {1u, 2u, 7u, 64u}) {
    SCOPED_TRACE(threads);
    std::vector<std::atomic<int>> runs(100);
    run_parallel(counting_tasks(runs), threads);
    for (const auto& r : runs) EXPECT_EQ(r.load(), 1);
  }
}

TEST(RunParallel, NoTasksReturnsAtOnce) {
  // No task to hand out: no thread waits for one (a pool that did would hang here, or take its idle timeout).
  const auto start = std::chrono::steady_clock::now();
  EXPECT_NO_THROW(run_parallel({}, 4));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST(RunParallel, UsesSeveralThreads) {
  // Four tasks that each wait (at most 10 s, so a broken pool fails instead of hanging) until
  // all four have started: all see the four only if four threads run them at once.
  std::atomic<int> started{0};
  std::atomic<int> saw_all{0};
  std::vector<std::function<void()>> tasks(4, [&] {
    ++started;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (started.load() < 4 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    if (started.load() == 4) ++saw_all;
  });
  run_parallel(tasks, 4);
  EXPECT_EQ(saw_all.load(), 4);
}

TEST(RunParallel, ThrowsATasksExceptionAfterTheOthersFinish) {
  for (const unsigned threads : {1u, 3u}) {
    SCOPED_TRACE(threads);
    std::vector<std::atomic<int>> runs(20);
    auto tasks = counting_tasks(runs);
    tasks[5] = [] { throw std::runtime_error("task 5 failed"); };
    try {
      run_parallel(tasks, threads);
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "task 5 failed");
    }
    for (std::size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].load(), i == 5 ? 0 : 1) << i;
  }
}

TEST(RunParallel, OnlyTheFirstOfSeveralExceptionsArrives) {
  std::vector<std::function<void()>> tasks;
  for (int i = 0; i < 10; ++i) tasks.emplace_back([] { throw std::runtime_error("failed"); });
  EXPECT_THROW(run_parallel(tasks, 3), std::runtime_error);
}

}  // namespace
}  // namespace fragscope
