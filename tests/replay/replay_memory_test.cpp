// run_replays: real replays of a recorded trace, counted as they run: the first alone, the rest
// as many at once as the budget holds for what the first one held.
#include "replay/replay_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "alloc/alloc_config.h"
#include "fixture_util.h"
#include "replay/replay_engine.h"

namespace fragscope::replay {
namespace {

struct Counted {
  std::atomic<unsigned> running{0};
  std::atomic<unsigned> most{0};
  std::vector<unsigned> alongside;  // how many ran beside each task when it started
  std::mutex mutex;
};

std::vector<std::function<std::uint64_t()>> replays(const PreparedTrace& trace, std::size_t count, Counted& c) {
  c.alongside.assign(count, 0);
  std::vector<std::function<std::uint64_t()>> tasks;
  for (std::size_t i = 0; i < count; ++i) {
    tasks.emplace_back([&trace, &c, i] {
      const unsigned now = ++c.running;
      unsigned most = c.most;
      while (now > most && !c.most.compare_exchange_weak(most, now)) {
      }
      {
        const std::lock_guard lock(c.mutex);
        c.alongside[i] = now - 1;
      }
      ReplayOptions options;
      options.timeline_points = 0;
      const std::uint64_t held = run_replay(trace, ModelKind::kCaching, alloc::AllocConfig{}, options).memory_bytes;
      --c.running;
      return held;
    });
  }
  return tasks;
}

TEST(RunReplays, TheFirstRunsAloneAndTheBudgetSetsHowManyFollow) {
  const PreparedTrace trace = testing::prepare_fixture("frag_oom_104");
  EXPECT_EQ(replay_memory_budget(trace), kReplayMemoryFloor);  // 240 KB of trace: the floor
  Counted roomy;
  const ReplayConcurrency all = run_replays(replays(trace, 9, roomy), 4, replay_memory_budget(trace));
  EXPECT_EQ(roomy.alongside[0], 0u);
  EXPECT_EQ(all.threads, 4u);
  EXPECT_FALSE(all.memory_limited);
  EXPECT_GT(all.replay_bytes, 0u);
  EXPECT_LT(all.replay_bytes, 16u << 20);  // a real trace's replay: a few MB at most

  Counted tight;  // room for one replay at a time
  const ReplayConcurrency one = run_replays(replays(trace, 9, tight), 4, all.replay_bytes);
  EXPECT_EQ(one.threads, 1u);
  EXPECT_TRUE(one.memory_limited);
  EXPECT_EQ(tight.most, 1u);

  Counted known;  // measured by the caller: no lone first replay
  const ReplayConcurrency two = run_replays(replays(trace, 9, known), 4, 2 * all.replay_bytes, all.replay_bytes);
  EXPECT_EQ(two.threads, 2u);
  EXPECT_LE(known.most, 2u);
}

}  // namespace
}  // namespace fragscope::replay
