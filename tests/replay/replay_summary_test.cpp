// summarize_replay on frag_oom_104: the recorded config (given or spelled out) replays with the
// self-check and dies where the run died; expandable segments at the same capacity passes the
// point the run died at (the experiment's rerun survived); the floor ignores the device.
#include "replay/replay_summary.h"

#include <gtest/gtest.h>

#include "fixture_util.h"
#include "util/bytes.h"
#include "util/error.h"

namespace fragscope::replay {
namespace {

using testing::prepare_fixture;
using testing::read_truth;

const PreparedTrace& frag_trace() {
  static const PreparedTrace trace = prepare_fixture("frag_oom_104");
  return trace;
}

TEST(ReplaySummary, RecordedConfigReplaysWithTheSelfCheckAndDiesWhereTheRunDied) {
  const auto truth = read_truth("frag_oom_104");
  const Capacity capacity = resolve_capacity(frag_trace(), {});
  for (const std::optional<std::string>& conf : {std::optional<std::string>{}, std::optional<std::string>{""}}) {
    const ReplaySummary s = summarize_replay(frag_trace(), conf, capacity);
    EXPECT_TRUE(s.conf_is_recorded);
    EXPECT_EQ(s.conf, "");
    EXPECT_EQ(s.trace, &frag_trace());
    EXPECT_EQ(s.capacity.bytes, capacity.bytes);
    ASSERT_TRUE(s.result.oom);
    EXPECT_EQ(s.result.oom_trace_index, truth["oom_event"]["index"].get<std::uint32_t>());
    EXPECT_TRUE(s.result.oom_matches_recorded);
    EXPECT_EQ(s.result.segment_mismatches, 0u);
    EXPECT_EQ(s.result.stats.num_alloc_retries, truth["num_alloc_retries"].get<std::uint64_t>());
    EXPECT_FALSE(s.result.timeline.empty());
    EXPECT_LE(s.ideal.stats.peak_reserved_bytes, s.result.stats.peak_reserved_bytes);
    EXPECT_TRUE(s.ideal.timeline.empty()) << "the floor draws no chart";
  }
}

TEST(ReplaySummary, ExpandableSegmentsPassTheOomPointAtTheSameCapacity) {
  const Capacity capacity = resolve_capacity(frag_trace(), {});
  const ReplaySummary s = summarize_replay(frag_trace(), "expandable_segments:True", capacity);
  EXPECT_FALSE(s.conf_is_recorded);
  EXPECT_EQ(s.conf, "expandable_segments:True");
  EXPECT_FALSE(s.result.oom);
  EXPECT_TRUE(s.result.passed_recorded_oom);
  EXPECT_EQ(s.result.segment_mismatches, 0u) << "no self-check against another config's recording";
  EXPECT_FALSE(s.result.first_mismatch_trace_index.has_value());
  EXPECT_LE(s.result.stats.peak_reserved_bytes, *capacity.bytes);
}

TEST(ReplaySummary, TheFloorIgnoresTheDevice) {
  const ReplaySummary real = summarize_replay(frag_trace(), std::nullopt, resolve_capacity(frag_trace(), {}));
  Capacity tiny;
  tiny.bytes = kGiB;
  tiny.source = "--capacity 1 GiB";
  const ReplaySummary small = summarize_replay(frag_trace(), std::nullopt, tiny);
  ASSERT_TRUE(small.result.oom);
  EXPECT_FALSE(small.result.oom_matches_recorded) << "it dies long before the recorded OOM";
  EXPECT_LT(*small.result.oom_trace_index, *real.result.oom_trace_index);
  EXPECT_LE(small.result.stats.peak_reserved_bytes, kGiB);
  EXPECT_EQ(small.ideal.stats.peak_reserved_bytes, real.ideal.stats.peak_reserved_bytes);
  EXPECT_FALSE(small.ideal.oom);
}

TEST(ReplaySummary, AConfigPyTorchWouldRejectIsAnInputError) {
  const Capacity capacity = resolve_capacity(frag_trace(), {});
  for (const char* conf : {"expandable_segments:maybe", "max_split_size_mb:-5", "no_such_option:1"})
    EXPECT_THROW(summarize_replay(frag_trace(), std::string(conf), capacity), InputError) << conf;
}

}  // namespace
}  // namespace fragscope::replay
