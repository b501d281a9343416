#include "replay/capacity.h"
#include "replay/replay_engine.h"

#include <fstream>

#include <gtest/gtest.h>

#include "fixture_util.h"
#include "util/error.h"
#include "snapshot/snapshot_reader.h"
#include "util/gpu_catalog.h"

namespace fragscope::replay {
namespace {

TEST(CapacityTest, RecordedOomGivesReservedPlusDeviceFree) {
  const PreparedTrace trace = testing::prepare_fixture("frag_oom_104");
  const nlohmann::json truth = testing::read_truth("frag_oom_104");
  const Capacity c = resolve_capacity(trace, {});
  ASSERT_TRUE(c.bytes);
  // 41485860864 reserved at the OOM (walked from the trace) + 1066532864 free.
  EXPECT_EQ(*c.bytes, 41487958016ull + truth["oom_event"]["device_free"].get<std::uint64_t>());
  EXPECT_NE(c.source.find("recorded OOM"), std::string::npos);
  // Below the budget the ballast left, as the README says (about 0.2 GiB of non-PyTorch memory).
  EXPECT_LT(*c.bytes, truth["budget_bytes"].get<std::uint64_t>());
}

TEST(CapacityTest, FailedCudaMallocBoundsItWithoutAnOom) {
  const PreparedTrace trace = testing::prepare_fixture("frag_expandable_104");
  const Capacity c = resolve_capacity(trace, {});
  ASSERT_TRUE(c.bytes);
  EXPECT_LT(*c.bytes, *trace.capacity.failed_at);
  EXPECT_GE(*c.bytes, trace.capacity.lower_bound);
}

TEST(CapacityTest, NoEvidenceMeansUnlimited) {
  const PreparedTrace trace = testing::prepare_fixture("fid_default");
  EXPECT_FALSE(resolve_capacity(trace, {}).bytes);
}

TEST(CapacityTest, FlagsOverrideTheTrace) {
  const PreparedTrace trace = testing::prepare_fixture("frag_oom_104");
  CapacityRequest request;
  request.capacity_bytes = 50ull << 30;
  EXPECT_EQ(*resolve_capacity(trace, request).bytes, 50ull << 30);
  request = {};
  request.gpu = "H200";
  const Capacity h200 = resolve_capacity(trace, request);
  EXPECT_EQ(*h200.bytes, find_gpu("H200")->usable_bytes());
  request = {};
  request.unlimited = true;
  EXPECT_FALSE(resolve_capacity(trace, request).bytes);
}

TEST(CapacityTest, MemoryFractionNeedsTheDeviceSize) {
  const PreparedTrace trace = testing::prepare_fixture("frag_oom_104");
  CapacityRequest request;
  request.memory_fraction = 0.5;
  EXPECT_THROW(resolve_capacity(trace, request), InputError);
  request.device_memory = 80ull << 30;
  EXPECT_EQ(*resolve_capacity(trace, request).allowed_maximum, 40ull << 30);
  request.memory_fraction = 1.5;
  EXPECT_THROW(resolve_capacity(trace, request), InputError);
  request = {};
  request.gpu = "no-such-gpu";
  EXPECT_THROW(resolve_capacity(trace, request), InputError);
}

TEST(CapacityTest, ReplayOptionsSimulateTheResolvedDevice) {
  const PreparedTrace trace = testing::prepare_fixture("frag_oom_104");
  CapacityRequest request;
  request.memory_fraction = 0.5;
  request.device_memory = 80ull << 30;
  const Capacity capacity = resolve_capacity(trace, request);
  const ReplayOptions options = replay_options_for(capacity);
  EXPECT_EQ(options.capacity, capacity.bytes);
  EXPECT_EQ(options.allowed_memory_maximum, std::optional<std::uint64_t>(40ull << 30));
  EXPECT_EQ(options.device_total_memory, 80ull << 30);
  EXPECT_EQ(options.timeline_points, ReplayOptions{}.timeline_points);  // the rest: defaults
  EXPECT_TRUE(options.use_recorded_addresses);
  EXPECT_FALSE(options.self_check);
}

// Held-out H200 recording (docs/VALIDATION.md, third batch): the process was capped with
// set_per_process_memory_fraction and failed with 115.84 GiB free on the device. Without the
// OOM message the trace alone shows a cap was in force, and bounds it tightly enough that the
// replay reproduces the run: its peak reserved, its retries and its OOM.
TEST(CapacityTest, ACudaMallocRefusedWithRoomOnTheDeviceMeansACap) {
  const std::string dir = std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/heldout/A_frac/";
  const PreparedTrace trace =
      prepare_trace(snapshot::read_snapshot_file(dir + "snapshot.pickle.gz"), 0, dir + "snapshot.pickle.gz");
  const Capacity capacity = resolve_capacity(trace, {});
  ASSERT_TRUE(capacity.allowed_maximum.has_value());
  EXPECT_GE(*capacity.allowed_maximum, trace.capacity.lower_bound);
  EXPECT_NE(capacity.source.find("per-process cap"), std::string::npos);
  ReplayOptions options = replay_options_for(capacity);
  options.self_check = true;
  const ReplayResult r = run_replay(trace, ModelKind::kCaching, trace.recorded_config, options);
  std::ifstream in(dir + "stats.json");
  const nlohmann::json stats = nlohmann::json::parse(in);
  EXPECT_EQ(r.stats.peak_reserved_bytes, stats["reserved_bytes.all.peak"].get<std::uint64_t>());
  EXPECT_EQ(r.stats.num_alloc_retries, stats["num_alloc_retries"].get<std::uint64_t>());
  EXPECT_TRUE(r.oom);
  EXPECT_TRUE(r.oom_matches_recorded);
  EXPECT_EQ(r.segment_mismatches, 0u);
}

// A driver OOM (the ballast left less free than the request) is no cap.
TEST(CapacityTest, ADriverOomIsNoCap) {
  const PreparedTrace trace = testing::prepare_fixture("frag_oom_104");
  EXPECT_FALSE(resolve_capacity(trace, {}).allowed_maximum.has_value());
}

}  // namespace
}  // namespace fragscope::replay
