// The H200 validation recording (docs/VALIDATION.md): a workload shape none of the fixtures
// has, recorded under three configs. Each replays exactly, and the default run's trace predicts
// the other two.

#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "alloc/alloc_config.h"
#include "replay/capacity.h"
#include "replay/replay_engine.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::replay {
namespace {

std::string run_dir(const std::string& run) {
  return std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/validation/" + run;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

PreparedTrace prepare_run(const std::string& run) {
  const std::string path = run_dir(run) + "/snapshot.pickle.gz";
  return prepare_trace(snapshot::read_snapshot_file(path), 0, path);
}

ReplayResult replay(const PreparedTrace& trace, const alloc::AllocConfig& config,
                    const Capacity& capacity) {
  ReplayOptions options;
  options.capacity = capacity.bytes;
  options.self_check = config == trace.recorded_config;
  return run_replay(trace, ModelKind::kCaching, config, options);
}

class ValidationRunTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ValidationRunTest, ReplaysExactlyUnderItsOwnConfig) {
  const PreparedTrace trace = prepare_run(GetParam());
  const nlohmann::json stats = read_json(run_dir(GetParam()) + "/stats.json");
  const ReplayResult r = replay(trace, trace.recorded_config, resolve_capacity(trace, {}));
  EXPECT_EQ(r.stats.peak_reserved_bytes, stats["reserved_bytes.all.peak"].get<std::uint64_t>());
  EXPECT_EQ(r.stats.peak_allocated_bytes, stats["allocated_bytes.all.peak"].get<std::uint64_t>());
  EXPECT_EQ(r.stats.num_alloc_retries, stats["num_alloc_retries"].get<std::uint64_t>());
  EXPECT_EQ(r.stats.num_ooms, stats["num_ooms"].get<std::uint64_t>());
  EXPECT_EQ(r.segment_mismatches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Runs, ValidationRunTest,
                         ::testing::Values("val_default", "val_expandable", "val_msplit256"));

/// Index of the event serving the request after `allocs` allocs (an alloc or an oom entry),
/// and the reserved peak up to it.
std::pair<std::uint32_t, std::uint64_t> peak_until_request(const std::string& run, std::size_t allocs) {
  const snapshot::Snapshot s = snapshot::read_snapshot_file(run_dir(run) + "/snapshot.pickle.gz");
  const PreparedTrace t = prepare_trace(s, 0, run);
  std::uint64_t reserved = t.recorded_initial_reserved;
  std::uint64_t peak = reserved;
  std::size_t seen = 0;
  const auto& trace = s.device_traces[0];
  for (std::uint32_t i = 0; i < trace.size(); ++i) {
    using snapshot::TraceAction;
    const auto a = trace[i].action;
    if (a == TraceAction::kSegmentAlloc || a == TraceAction::kSegmentMap) reserved += trace[i].size;
    if (a == TraceAction::kSegmentFree || a == TraceAction::kSegmentUnmap) reserved -= trace[i].size;
    peak = std::max(peak, reserved);
    if (a == TraceAction::kOom || (a == TraceAction::kAlloc && ++seen == allocs + 1)) return {i, peak};
  }
  return {0, peak};
}

TEST(ValidationTest, DefaultRunPredictsTheOtherConfigs) {
  const PreparedTrace trace = prepare_run("val_default");
  const Capacity capacity = resolve_capacity(trace, {});
  ASSERT_EQ(trace.ooms.size(), 1u);
  const snapshot::Snapshot s = snapshot::read_snapshot_file(run_dir("val_default") + "/snapshot.pickle.gz");
  std::size_t allocs_before_oom = 0;
  for (std::uint32_t i = 0; i < trace.ooms[0].trace_index; ++i) {
    allocs_before_oom += s.device_traces[0][i].action == snapshot::TraceAction::kAlloc;
  }

  // Expandable segments pass the request the default run died on, with the real peak.
  const ReplayResult expandable =
      replay(trace, alloc::parse_alloc_conf("expandable_segments:True"), capacity);
  EXPECT_FALSE(expandable.oom);
  EXPECT_TRUE(expandable.passed_recorded_oom);
  const auto [expandable_index, expandable_peak] = peak_until_request("val_expandable", allocs_before_oom);
  EXPECT_EQ(expandable.stats.peak_reserved_bytes, expandable_peak);
  EXPECT_EQ(expandable.stats.num_alloc_retries, 0u);

  // max_split_size_mb:256 dies on the same request, with the real peak and retries.
  const ReplayResult msplit = replay(trace, alloc::parse_alloc_conf("max_split_size_mb:256"), capacity);
  ASSERT_TRUE(msplit.oom);
  EXPECT_EQ(*msplit.oom_trace_index, trace.ooms[0].trace_index);
  const nlohmann::json real = read_json(run_dir("val_msplit256") + "/stats.json");
  EXPECT_EQ(msplit.stats.peak_reserved_bytes, real["reserved_bytes.all.peak"].get<std::uint64_t>());
  EXPECT_EQ(msplit.stats.num_alloc_retries, real["num_alloc_retries"].get<std::uint64_t>());
  const auto [msplit_index, msplit_peak] = peak_until_request("val_msplit256", allocs_before_oom);
  EXPECT_EQ(msplit.stats.peak_reserved_bytes, msplit_peak);
  (void)expandable_index;
  (void)msplit_index;
}

}  // namespace
}  // namespace fragscope::replay
