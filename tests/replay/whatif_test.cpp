#include "replay/whatif.h"

#include <algorithm>

#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include <fmt/format.h>

#include "fixture_util.h"
#include "util/error.h"
#include "replay/replay_summary.h"

namespace fragscope::replay {
namespace {

TEST(WhatIfTest, SweepStartsWithTheRecordedConfigAndHasNoDuplicates) {
  const PreparedTrace trace = testing::prepare_fixture("fid_expandable");
  const auto sweep = standard_sweep(trace, false);
  ASSERT_FALSE(sweep.empty());
  EXPECT_TRUE(sweep[0].recorded);
  EXPECT_EQ(sweep[0].conf, "expandable_segments:True");
  for (std::size_t i = 0; i < sweep.size(); ++i) {
    for (std::size_t j = i + 1; j < sweep.size(); ++j) EXPECT_FALSE(sweep[i].config == sweep[j].config);
  }
  const auto with_gc = standard_sweep(trace, true);
  EXPECT_GT(with_gc.size(), sweep.size());  // GC thresholds only make sense with a fraction
}

TEST(WhatIfTest, SweepAtCapacityAddsOnlyTheUserConfigsTheSweepLacks) {
  const PreparedTrace trace = testing::prepare_fixture("frag_oom_104");
  const Capacity capacity = resolve_capacity(trace, {});
  WhatIfOptions options;
  options.threads = 2;
  const std::size_t standard = standard_sweep(trace, capacity.allowed_maximum.has_value()).size();
  // Already swept (spelt differently), then new: only the new one is added, labelled normalised.
  const WhatIfReport report = sweep_at_capacity(
      trace, capacity, options,
      {user_config("expandable_segments:True"), user_config("max_split_size_mb:96,expandable_segments:False")});
  ASSERT_EQ(report.rows.size(), standard + 1);
  const auto added = std::count_if(report.rows.begin(), report.rows.end(),
                                   [](const WhatIfRow& row) { return row.config.conf == "max_split_size_mb:96"; });
  EXPECT_EQ(added, 1);
  EXPECT_THROW(user_config("max_split_size_mb:1"), InputError);  // PyTorch's minimum is 20 MB
}

TEST(WhatIfTest, FragmentationOomRecommendsExpandableSegments) {
  const PreparedTrace trace = testing::prepare_fixture("frag_oom_104");
  const Capacity capacity = resolve_capacity(trace, {});
  WhatIfOptions options;
  options.threads = 2;
  const WhatIfReport report = run_whatif(trace, standard_sweep(trace, false), capacity, options);
  ASSERT_TRUE(report.recommended);
  const WhatIfRow& best = report.rows[*report.recommended];
  EXPECT_TRUE(best.config.config.expandable_segments);
  EXPECT_TRUE(best.fits());
  for (const WhatIfRow& row : report.rows) {
    if (row.config.recorded) {
      ASSERT_TRUE(row.at_capacity);
      EXPECT_TRUE(row.at_capacity->oom);  // the recorded config fails where the real run did
      EXPECT_EQ(*row.at_capacity->oom_trace_index, trace.ooms[0].trace_index);
    }
    EXPECT_GE(row.unlimited.stats.peak_reserved_bytes, report.ideal.stats.peak_reserved_bytes);
  }
  for (std::size_t i = 1; i < report.rows.size(); ++i) {
    EXPECT_LE(report.rows[i - 1].unlimited.stats.peak_reserved_bytes,
              report.rows[i].unlimited.stats.peak_reserved_bytes);
  }
}

TEST(WhatIfTest, MinCapacityIsTheEdgeOfSurvival) {
  const PreparedTrace trace = testing::prepare_fixture("frag_oom_104");
  const Capacity capacity = resolve_capacity(trace, {});
  const ReplayResult ideal = run_replay(trace, ModelKind::kIdeal, trace.recorded_config, {});
  for (const char* conf : {"", "expandable_segments:True"}) {
    const alloc::AllocConfig config = alloc::parse_alloc_conf(conf);
    const ReplayResult unlimited = run_replay(trace, ModelKind::kCaching, config, {});
    const std::uint64_t need = find_min_capacity(trace, ModelKind::kCaching, config, {},
                                                 ideal.stats.peak_reserved_bytes,
                                                 unlimited.stats.peak_reserved_bytes);
    ReplayOptions at;
    at.capacity = need;
    EXPECT_FALSE(run_replay(trace, ModelKind::kCaching, config, at).oom) << conf;
    at.capacity = need - (2ull << 20);
    EXPECT_TRUE(run_replay(trace, ModelKind::kCaching, config, at).oom) << conf;
    EXPECT_GE(need, ideal.stats.peak_reserved_bytes);
    if (config.expandable_segments) {
      EXPECT_LT(need, *capacity.bytes);  // it survives the recorded device
    } else {
      EXPECT_GT(need, *capacity.bytes);  // the default config needs more than the device had
    }
  }
}

/// Every report of every task, as a progress display would get them.
struct ProgressLog {
  std::mutex mutex;
  std::map<std::string, std::vector<ProgressTick>> ticks;  // by task
  Progress progress() {
    return [this](const ProgressTick& t) {
      const std::lock_guard lock(mutex);
      ticks[std::string(t.task)].push_back(t);
    };
  }
};

TEST(WhatIfTest, ProgressCountsEveryReplayAndEndsEachTaskAtItsTotal) {
  const PreparedTrace trace = testing::prepare_fixture("frag_oom_104");
  const Capacity capacity = resolve_capacity(trace, {});
  const auto configs = standard_sweep(trace, false);
  ProgressLog log;
  WhatIfOptions options;
  options.threads = 2;
  options.min_capacity = true;
  options.progress = log.progress();
  const WhatIfReport report = run_whatif(trace, configs, capacity, options);
  ASSERT_EQ(log.ticks.size(), 2u);
  const std::uint64_t events = trace.ops.size();
  const auto& demand = log.ticks.at(fmt::format("what-if: {} configs, no memory limit", configs.size()));
  EXPECT_EQ(demand.front().total, (configs.size() + 1) * events);  // every config and the ideal packer
  const auto& limits = log.ticks.at(fmt::format("what-if: {} configs at the capacity, least capacity", configs.size()));
  std::uint64_t bisections = 0;
  for (const WhatIfRow& row : report.rows)
    bisections +=
        max_bisection_replays(report.ideal.stats.peak_reserved_bytes, row.unlimited.stats.peak_reserved_bytes);
  EXPECT_EQ(limits.front().total, (configs.size() + bisections) * events);
  for (const auto& [task, ticks] : log.ticks) {
    EXPECT_EQ(ticks.front().done, 0u) << task;  // the task announces itself before any work
    std::uint64_t most = 0;
    for (const ProgressTick& t : ticks) {
      EXPECT_EQ(t.unit, "events");
      EXPECT_LE(t.done, t.total) << task;
      most = std::max(most, t.done);
    }
    EXPECT_EQ(most, ticks.front().total) << task;  // the last replay brings it to its total
  }
}

TEST(WhatIfTest, MaxBisectionReplaysBoundsTheBisection) {
  constexpr std::uint64_t kStep = 2ull << 20;
  EXPECT_EQ(max_bisection_replays(10 * kStep, 10 * kStep), 1u);      // only the floor is tried
  EXPECT_EQ(max_bisection_replays(10 * kStep, 11 * kStep), 1u);      // one step: the floor decides
  EXPECT_EQ(max_bisection_replays(10 * kStep, 12 * kStep), 2u);
  EXPECT_EQ(max_bisection_replays(10 * kStep, 15 * kStep), 1u + 3);  // 5 steps: ceil(log2 5) halvings
  EXPECT_EQ(max_bisection_replays(0, 1024 * kStep), 1u + 10);
}

TEST(ReplaySummaryTest, ProgressCountsBothReplays) {
  const PreparedTrace trace = testing::prepare_fixture("frag_oom_104");
  ProgressLog log;
  summarize_replay(trace, std::nullopt, resolve_capacity(trace, {}), log.progress());
  ASSERT_EQ(log.ticks.size(), 1u);
  const auto& [task, ticks] = *log.ticks.begin();
  EXPECT_EQ(task, "replaying " + trace.source);
  EXPECT_EQ(ticks.back().done, 2 * trace.ops.size());  // one thread: in order
  EXPECT_EQ(ticks.back().total, 2 * trace.ops.size());
}

}  // namespace
}  // namespace fragscope::replay
