// `analyze --json`: every key holds the number the recording says (truth.json, memory_stats()
// taken at the same moment), after a round trip through text as a program would read it.
// Keys and values only: new keys and key order are free.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../fixture_snapshots.h"
#include "../hand_built_snapshot.h"
#include "metrics/snapshot_analysis.h"
#include "report/analyze_report.h"

namespace fragscope::report {
namespace {

using nlohmann::json;
using testing::EndStateFixture;
using testing::HandBuiltSnapshot;

json rendered(const snapshot::Snapshot& snap, const std::string& source) {
  return json::parse(analyze_json(metrics::analyze_snapshot(snap, 0), source).dump());
}

class AnalyzeJson : public ::testing::TestWithParam<EndStateFixture> {};

TEST_P(AnalyzeJson, TotalsAreTruthAndMemoryStats) {
  const auto& f = GetParam();
  const json j = rendered(f.read(), f.snapshot.string());
  const auto& t = f.truth;
  EXPECT_EQ(j.at("source"), f.snapshot.string());
  EXPECT_EQ(j.at("device"), 0);
  EXPECT_EQ(j.at("devices"), json::array({0}));
  EXPECT_EQ(j.at("segments"), t["segments"]);
  EXPECT_EQ(j.at("blocks"), t["blocks"]);
  EXPECT_EQ(j.at("total_reserved_bytes"), t["total_reserved"]);
  EXPECT_EQ(j.at("requested_bytes"), t["total_allocated"]);
  EXPECT_EQ(j.at("free_internal_bytes"), t["free_internal"]);
  EXPECT_EQ(j.at("free_external_bytes"), t["free_external"]);
  EXPECT_EQ(j.at("largest_free_block_bytes"), t["largest_free_block"]);
  EXPECT_EQ(j.at("largest_cached_allocation_bytes"), t["largest_free_block"]);
  EXPECT_EQ(j.at("allocated_bytes"), f.stats["allocated_bytes.all.current"]);
  EXPECT_EQ(j.at("pending_free_bytes").get<std::uint64_t>() + j.at("allocated_bytes").get<std::uint64_t>(),
            f.stats["active_bytes.all.current"].get<std::uint64_t>());
  const auto inactive = j.at("inactive_bytes").get<double>();
  ASSERT_GT(inactive, 0);
  EXPECT_EQ(inactive, t["free_external"].get<double>() - j.at("pending_free_bytes").get<double>());
  EXPECT_NEAR(j.at("fragmentation_index").get<double>(), 1.0 - t["largest_free_block"].get<double>() / inactive, 5e-4);
  EXPECT_EQ(j.at("expandable_segments"), f.expandable() ? t["segments"].get<std::uint64_t>() : 0u);
}

TEST_P(AnalyzeJson, TraceKeysAreTruth) {
  const auto& f = GetParam();
  const json j = rendered(f.read(), f.snapshot.string());
  const auto& t = f.truth;
  EXPECT_EQ(j.at("trace_entries"), t["trace_entries"]);
  EXPECT_EQ(j.at("trace_actions"), t["trace_actions"]);
  EXPECT_EQ(j.at("reserved_at_trace_start_bytes"), t["reserved_at_trace_start"]);
  EXPECT_EQ(j.at("trace_peak_reserved_bytes"), f.stats["reserved_bytes.all.peak"]);
  EXPECT_GT(j.at("trace_last_time_us").get<std::int64_t>(), j.at("trace_first_time_us").get<std::int64_t>());
  if (f.oom()) {
    ASSERT_EQ(j.at("oom_events").size(), 1u);
    const json& oom = j["oom_events"][0];
    EXPECT_EQ(oom.at("index"), t["oom_event"]["index"]);
    EXPECT_EQ(oom.at("request_bytes"), t["oom_event"]["size"]);
    EXPECT_EQ(oom.at("device_free_bytes"), t["oom_event"]["device_free"]);
    EXPECT_GT(oom.at("time_us").get<std::int64_t>(), 0);
    EXPECT_EQ(j.at("driver_free_bytes"), t["oom_event"]["device_free"]);
  } else {
    EXPECT_TRUE(j.at("oom_events").empty());
    EXPECT_TRUE(j.at("driver_free_bytes").is_null());
  }
}

TEST_P(AnalyzeJson, SegmentMapRowsTileTheirSegments) {
  const auto& f = GetParam();
  const json j = rendered(f.read(), f.snapshot.string());
  const json& rows = j.at("segment_map");
  ASSERT_EQ(rows.size(), f.truth["segments"].get<std::size_t>());
  std::uint64_t reserved = 0, free = 0, previous_address = 0;
  for (const json& row : rows) {
    const auto total = row.at("total_size").get<std::uint64_t>();
    EXPECT_GT(row.at("address").get<std::uint64_t>(), previous_address);
    previous_address = row["address"].get<std::uint64_t>();
    std::uint64_t offset = 0, free_in_runs = 0;
    for (const json& run : row.at("runs")) {
      ASSERT_EQ(run.size(), 3u);  // [kind, offset, size]
      const std::string kind = run[0];
      EXPECT_TRUE(kind == "allocated" || kind == "pending_free" || kind == "free") << kind;
      EXPECT_EQ(run[1].get<std::uint64_t>(), offset);
      offset += run[2].get<std::uint64_t>();
      if (kind == "free") free_in_runs += run[2].get<std::uint64_t>();
    }
    EXPECT_EQ(offset, total);
    EXPECT_EQ(free_in_runs, row.at("free_bytes").get<std::uint64_t>());
    EXPECT_LE(row.at("largest_free").get<std::uint64_t>(), free_in_runs);
    reserved += total;
    free += free_in_runs;
  }
  EXPECT_EQ(reserved, f.truth["total_reserved"].get<std::uint64_t>());
  EXPECT_EQ(free, f.stats["reserved_bytes.all.current"].get<std::uint64_t>() -
                      f.stats["active_bytes.all.current"].get<std::uint64_t>());
}

TEST_P(AnalyzeJson, PoolsAndSitesAddUp) {
  const auto& f = GetParam();
  const json j = rendered(f.read(), f.snapshot.string());
  std::map<std::string, std::uint64_t> reserved;
  for (const json& g : j.at("by_pool_stream")) {
    reserved[g.at("pool").get<std::string>()] += g.at("total_reserved_bytes").get<std::uint64_t>();
    EXPECT_TRUE(g.at("stream").is_number_unsigned());
  }
  EXPECT_EQ(reserved["small"], f.stats["reserved_bytes.small_pool.current"].get<std::uint64_t>());
  EXPECT_EQ(reserved["large"], f.stats["reserved_bytes.large_pool.current"].get<std::uint64_t>());
  const json& sites = j.at("top_sites");
  ASSERT_FALSE(sites.empty());
  EXPECT_LE(sites.size(), 10u);
  std::uint64_t site_bytes = 0;
  for (std::size_t i = 0; i < sites.size(); ++i) {
    EXPECT_FALSE(sites[i].at("location").get<std::string>().empty());
    EXPECT_GT(sites[i].at("blocks").get<std::uint64_t>(), 0u);
    if (i > 0) {
      EXPECT_LE(sites[i]["bytes"].get<std::uint64_t>(), sites[i - 1]["bytes"].get<std::uint64_t>());
    }
    site_bytes += sites[i]["bytes"].get<std::uint64_t>();
  }
  EXPECT_LE(site_bytes, j["allocated_bytes"].get<std::uint64_t>());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, AnalyzeJson, ::testing::ValuesIn(testing::end_state_fixtures()),
                         testing::fixture_name);

TEST(AnalyzeJsonHandBuilt, PendingFreeRunsAndEmptyParts) {
  HandBuiltSnapshot h;
  h.segment(0x200000, {testing::live(1024, 1000), testing::pending(1024), testing::hole(2048)});
  const json j = rendered(h.snap, "hand.pickle");
  EXPECT_EQ(j.at("pending_free_bytes"), 1024);
  EXPECT_EQ(j.at("inactive_bytes"), 2048);
  EXPECT_EQ(j.at("free_external_bytes"), 3072);
  const json& runs = j.at("segment_map").at(0).at("runs");
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[1], json::array({"pending_free", 1024, 1024}));
  EXPECT_EQ(j.at("trace_entries"), 0);
  EXPECT_TRUE(j.at("trace_actions").empty());
  EXPECT_TRUE(j.at("driver_free_bytes").is_null());
  EXPECT_EQ(j.at("fragmentation_index"), 0.0);  // one hole

  const json empty = rendered(HandBuiltSnapshot().snap, "empty.pickle");
  EXPECT_EQ(empty.at("total_reserved_bytes"), 0);
  EXPECT_TRUE(empty.at("segment_map").empty());
  EXPECT_TRUE(empty.at("by_pool_stream").empty());
  EXPECT_TRUE(empty.at("top_sites").empty());
  EXPECT_TRUE(empty.at("devices").empty());
}

}  // namespace
}  // namespace fragscope::report
