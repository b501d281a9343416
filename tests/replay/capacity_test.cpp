#include "replay/capacity.h"
#include "replay/replay_engine.h"

#include <gtest/gtest.h>

#include "fixture_util.h"
#include "util/error.h"
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

}  // namespace
}  // namespace fragscope::replay
