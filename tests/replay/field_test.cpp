// The replay on field recordings (tests/data/field): third-party training code on the H200,
// dumped as its users dump it. Under the recorded config and the capacity the trace itself
// implies, each replay must find every malloc's segment events as recorded, the run's
// max_memory_reserved and num_alloc_retries to the byte and count, and its OOM on the event
// the run died of.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "replay/capacity.h"
#include "replay/prepared_trace.h"
#include "replay/replay_engine.h"
#include "snapshot/snapshot_reader.h"

namespace fragscope::replay {
namespace {

const std::string kField = std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/field/";

struct Recording {
  PreparedTrace trace;
  nlohmann::json truth;
};

Recording load(const std::string& name) {
  std::string snapshot_path;
  for (const auto& entry : std::filesystem::directory_iterator(kField + name)) {
    if (entry.path().filename().string().find(".pickle") != std::string::npos) snapshot_path = entry.path().string();
  }
  const snapshot::Snapshot snap = snapshot::read_snapshot_file(snapshot_path);
  std::ifstream truth(kField + name + "/truth.json");
  return {prepare_trace(snap, snapshot::busiest_device(snap), snapshot_path), nlohmann::json::parse(truth)};
}

void expect_exact(const std::string& name) {
  SCOPED_TRACE(name);
  const Recording r = load(name);
  ReplayOptions options = replay_options_for(resolve_capacity(r.trace, {}));
  options.self_check = true;
  const ReplayResult result = run_replay(r.trace, ModelKind::kCaching, r.trace.recorded_config, options);
  EXPECT_EQ(result.segment_mismatches, 0u) << "first at event " << result.first_mismatch_trace_index.value_or(0);
  EXPECT_EQ(result.stats.peak_reserved_bytes, r.truth["max_memory_reserved"].get<std::uint64_t>());
  EXPECT_EQ(result.stats.peak_reserved_bytes, r.trace.recorded_peak_reserved);
  EXPECT_EQ(result.stats.num_alloc_retries, r.truth["num_alloc_retries"].get<std::uint64_t>());
  EXPECT_EQ(result.stats.num_ooms, r.truth["num_ooms"].get<std::uint64_t>());
  EXPECT_TRUE(result.completed);
  if (r.truth["outcome"] == "oom") {
    ASSERT_TRUE(result.oom);
    ASSERT_FALSE(r.trace.ooms.empty());
    EXPECT_EQ(*result.oom_trace_index, r.trace.ooms.back().trace_index);
    EXPECT_TRUE(result.oom_matches_recorded);
  } else {
    EXPECT_FALSE(result.oom);
  }
}

TEST(FieldTest, PlainTrainingLoopsReplayExactly) {
  for (const char* name : {"acc_edge", "fsdp_edge", "hfc_lo", "hft_edge", "hft_lo"}) expect_exact(name);
}

TEST(FieldTest, UserEmptyCacheCallsReplayAsFlushes) {
  // llama_loop.py calls torch.cuda.empty_cache() every 3 steps; Lightning flushes after the OOM.
  for (const char* name : {"ec_edge", "lit_edge"}) expect_exact(name);
  const Recording r = load("ec_edge");
  EXPECT_EQ(r.trace.flushes, 3u);
}

TEST(FieldTest, TheDriversRefusalsBoundTheCapacityBelowItsFreeFigure) {
  // ec_lo: cudaMemGetInfo at the OOM overstates by 1.13 MiB what an earlier cudaMalloc got.
  expect_exact("ec_lo");
}

TEST(FieldTest, CudnnBenchmarkFlushesReplayAsFlushes) {
  // cudnn.benchmark: emptyCache() around every algorithm search, often right before a cudaMalloc.
  for (const char* name : {"rn_edge", "rn_lo"}) expect_exact(name);
  const Recording r = load("rn_edge");
  EXPECT_GT(r.trace.flushes, 200u);
  EXPECT_EQ(r.trace.capacity.release_bursts, 2u);  // one failed cudaMalloc retried, and the OOM
}

TEST(FieldTest, ACudaGraphPoolReplaysAsAPoolOfItsOwn) {
  // torch.compile(mode="reduce-overhead"): cudagraph trees allocate on the capture stream from
  // the graph's private pool (segment_pool_id (0, 1)); empty_cache() at the end leaves it alone.
  expect_exact("cro_cal");
  const Recording r = load("cro_cal");
  ASSERT_EQ(r.trace.mem_pools.size(), 2u);
  EXPECT_EQ(r.trace.mem_pools[1], (std::pair<std::int64_t, std::int64_t>{0, 1}));
  std::size_t in_graph_pool = 0;
  for (const Op& op : r.trace.ops) in_graph_pool += op.kind == OpKind::kAlloc && op.pool == 1;
  EXPECT_EQ(in_graph_pool, 1263u);
}

}  // namespace
}  // namespace fragscope::replay
