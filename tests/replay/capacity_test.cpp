#include "replay/capacity.h"
#include "replay/replay_engine.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "fixture_util.h"
#include "replay/replay_summary.h"
#include "report/replay_report.h"
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

/// A run whose non-PyTorch memory grows by 10 MiB: the driver serves 60 MiB early on; after an
/// empty_cache() it refuses 24 MiB on top of 30 MiB held (54 MiB) and the run dies there with
/// 20 MiB free.
PreparedTrace growing_non_pytorch_memory() {
  constexpr std::uint64_t kMiB = 1ull << 20;
  constexpr std::uint64_t kA = 0x7f0000000000, kB = kA + (64 << 20), kC = kA + (128 << 20);
  auto event = [](snapshot::TraceAction action, std::uint64_t addr, std::uint64_t size) {
    snapshot::TraceEvent e;
    e.action = action;
    e.addr = addr;
    e.size = size;
    return e;
  };
  using snapshot::TraceAction;
  snapshot::Snapshot s;
  s.device_traces.push_back({
      event(TraceAction::kSegmentAlloc, kA, 40 * kMiB), event(TraceAction::kAlloc, kA, 40 * kMiB),
      event(TraceAction::kSegmentAlloc, kB, 20 * kMiB), event(TraceAction::kAlloc, kB, 20 * kMiB),
      event(TraceAction::kFreeRequested, kB, 20 * kMiB), event(TraceAction::kFreeCompleted, kB, 20 * kMiB),
      event(TraceAction::kFreeRequested, kA, 40 * kMiB), event(TraceAction::kFreeCompleted, kA, 40 * kMiB),
      event(TraceAction::kSegmentFree, kA, 40 * kMiB), event(TraceAction::kSegmentFree, kB, 20 * kMiB),
      event(TraceAction::kSnapshot, 0, 0),  // the two releases were an empty_cache()
      event(TraceAction::kSegmentAlloc, kC, 30 * kMiB), event(TraceAction::kAlloc, kC, 30 * kMiB),
      event(TraceAction::kOom, 20 * kMiB, 24 * kMiB),
      event(TraceAction::kFreeRequested, kC, 30 * kMiB), event(TraceAction::kFreeCompleted, kC, 30 * kMiB)});
  return prepare_trace(s, 0, "growing.pickle");
}

TEST(CapacityTest, NonPyTorchMemoryThatGrowsIsReplayedOverTimeAndNamedAsTheOomCause) {
  constexpr std::uint64_t kMiB = 1ull << 20;
  const PreparedTrace trace = growing_non_pytorch_memory();
  ASSERT_EQ(trace.capacity.pieces.size(), 2u);
  EXPECT_EQ(trace.capacity.pieces[1].first_trace_index, 13u);
  const Capacity capacity = resolve_capacity(trace, {});
  ASSERT_EQ(capacity.steps.size(), 2u);
  EXPECT_EQ(capacity.steps[0].bytes, 60 * kMiB);  // the most the driver served before
  EXPECT_EQ(capacity.steps[1].from_trace_index, 13u);
  EXPECT_EQ(capacity.steps[1].bytes, 50 * kMiB);  // 30 MiB held + 20 MiB free at the OOM
  ASSERT_EQ(capacity.changes.size(), 1u);
  const CapacityChange& change = capacity.changes[0];
  EXPECT_TRUE(change.non_pytorch_grew());
  EXPECT_EQ(change.after_trace_index, 2u);  // served 60 MiB there
  EXPECT_EQ(change.by_trace_index, 13u);    // refused 54 MiB here
  EXPECT_EQ(change.at_least_bytes, 6 * kMiB + 1);  // served 60, then refused 54
  EXPECT_EQ(*capacity.bytes, 60 * kMiB);
  EXPECT_NE(capacity.source.find("over time"), std::string::npos);

  // Replayed over time, every event is as recorded and the OOM lands where the run died; the
  // capacity at the OOM alone would have refused the 60 MiB served early on.
  const ReplaySummary summary = summarize_replay(trace, std::nullopt, capacity);
  EXPECT_EQ(summary.result.segment_mismatches, 0u);
  EXPECT_TRUE(summary.result.oom_matches_recorded);
  EXPECT_EQ(summary.result.stats.peak_reserved_bytes, 60 * kMiB);
  ReplayOptions constant = replay_options_for(capacity);
  constant.capacity_steps.clear();
  constant.capacity = 50 * kMiB;
  const ReplayResult at_oom_figure = run_replay(trace, ModelKind::kCaching, trace.recorded_config, constant);
  EXPECT_FALSE(at_oom_figure.oom_matches_recorded);
  EXPECT_EQ(*at_oom_figure.oom_trace_index, 3u);
  // At the capacity it started with, the run passes its OOM: the growth caused it.
  ASSERT_TRUE(summary.at_start_capacity);
  EXPECT_TRUE(summary.at_start_capacity->passed_recorded_oom);
  std::ostringstream text;
  report::write_replay_text(text, summary);
  const std::string line = "non-PyTorch memory grew by 10.00 MiB (at least 6.00 MiB) between events 2 and 13";
  EXPECT_NE(text.str().find(line), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("OOM cause        non-PyTorch memory's growth"), std::string::npos) << text.str();
}

TEST(CapacityTest, ADriverFigureAboveARefusalIsBroughtBelowIt) {
  // ec_lo (field): cudaMemGetInfo at the OOM says 14.25 GiB + 183.12 MiB, but a cudaMalloc
  // asking for 1.13 MiB less in total was refused before: the capacity is below that.
  const std::string path =
      std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/field/ec_lo/oom_snapshot.pickle.zst";
  const PreparedTrace trace = prepare_trace(snapshot::read_snapshot_file(path), 0, path);
  const Capacity capacity = resolve_capacity(trace, {});
  ASSERT_EQ(trace.capacity.pieces.size(), 1u);
  EXPECT_EQ(*capacity.bytes, *trace.capacity.pieces[0].upper - 1);
  EXPECT_LT(*capacity.bytes, trace.ooms.back().reserved_at_oom + trace.ooms.back().device_free);
  EXPECT_NE(capacity.source.find("was refused at event 47652"), std::string::npos) << capacity.source;
  EXPECT_TRUE(capacity.steps.empty());
}

// A driver OOM (the ballast left less free than the request) is no cap.
TEST(CapacityTest, ADriverOomIsNoCap) {
  const PreparedTrace trace = testing::prepare_fixture("frag_oom_104");
  EXPECT_FALSE(resolve_capacity(trace, {}).allowed_maximum.has_value());
}

// The driver refuses a cudaMalloc with a little more free than the ask (what it keeps for itself): these H200
// recordings failed with 1.12-3.12 MiB free beyond the segment asked for, under a ballast and no cap. They are
// driver OOMs: no cap is inferred, the refusal bounds the capacity, and the replay fails where the run did.
TEST(CapacityTest, ALittleFreeBeyondTheAskIsADriverOomNotACap) {
  const std::string root = std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/";
  for (const std::string& path :
       {root + "field/t5g_lo/oom_snapshot.pickle.zst", root + "field/cro_lo/oom_snapshot.pickle.zst",
        root + "field/clip_lo/oom_snapshot.pickle.zst", root + "heldout/B_cap/snapshot.pickle.gz"}) {
    SCOPED_TRACE(path);
    const PreparedTrace trace = prepare_trace(snapshot::read_snapshot_file(path), 0, path);
    const Capacity capacity = resolve_capacity(trace, {});
    EXPECT_FALSE(capacity.allowed_maximum.has_value());
    EXPECT_EQ(capacity.source.find("per-process cap"), std::string::npos) << capacity.source;
    ReplayOptions options = replay_options_for(capacity);
    options.self_check = true;
    const ReplayResult r = run_replay(trace, ModelKind::kCaching, trace.recorded_config, options);
    EXPECT_TRUE(r.oom);
    EXPECT_TRUE(r.oom_matches_recorded);
  }
}

}  // namespace
}  // namespace fragscope::replay
