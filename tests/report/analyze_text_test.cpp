// `analyze` as text: the facts a person reads, not the layout. The segment map draws the
// largest segments with cells in proportion to their bytes; the OOM is explained by the right
// comparison; counts and byte figures are the recording's (truth.json).
#include <algorithm>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "../fixture_snapshots.h"
#include "../hand_built_snapshot.h"
#include "metrics/snapshot_analysis.h"
#include "report/analyze_report.h"
#include "util/bytes.h"

namespace fragscope::report {
namespace {

using testing::EndStateFixture;
using testing::HandBuiltSnapshot;

std::string render(const metrics::SnapshotAnalysis& a, const AnalyzeTextOptions& options = {}) {
  std::ostringstream out;
  write_analyze_text(out, a, "run/rank0.pickle", options);
  return out.str();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct MapLine {
  std::uint64_t address = 0;
  std::string cells;
};

/// The segment-map rows: "0x<address> ... |<cells>| ...".
std::vector<MapLine> map_lines(const std::string& text) {
  static const std::regex row(R"(^\s*0x([0-9a-f]+)\s.*\|([#.\-]*)\|)");
  std::vector<MapLine> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) lines.push_back({std::stoull(m[1], nullptr, 16), m[2]});
  }
  return lines;
}

const metrics::SegmentRow& row_at(const metrics::SnapshotAnalysis& a, std::uint64_t address) {
  const auto it = std::find_if(a.segment_map.begin(), a.segment_map.end(),
                               [&](const auto& r) { return r.address == address; });
  EXPECT_NE(it, a.segment_map.end()) << std::hex << address;
  return *it;
}

class AnalyzeText : public ::testing::TestWithParam<EndStateFixture> {};

TEST_P(AnalyzeText, SegmentMapDrawsTheLargestSegmentsInProportion) {
  const auto& f = GetParam();
  const auto a = metrics::analyze_snapshot(f.read(), 0);
  const std::size_t segments = a.segment_map.size();
  const AnalyzeTextOptions options{.map_rows = 12, .map_width = 40};
  const std::string text = render(a, options);
  const auto lines = map_lines(text);
  const std::size_t shown = std::min<std::size_t>(12, segments);
  ASSERT_EQ(lines.size(), shown);
  std::uint64_t smallest_drawn = ~0ull;
  for (const MapLine& line : lines) {
    const auto& row = row_at(a, line.address);
    smallest_drawn = std::min(smallest_drawn, row.total_size);
    ASSERT_EQ(line.cells.size(), 40u);
    // Each cell shows the kind holding most of its 1/40 of the segment: the '#' cells are the
    // allocated share, give or take one cell per run boundary.
    std::uint64_t allocated = 0;
    for (const auto& run : row.runs) allocated += run.kind == metrics::RunKind::kAllocated ? run.size : 0;
    const double expected = 40.0 * static_cast<double>(allocated) / static_cast<double>(row.total_size);
    const auto hashes = std::count(line.cells.begin(), line.cells.end(), '#');
    EXPECT_NEAR(static_cast<double>(hashes), expected, static_cast<double>(row.runs.size()) + 1) << line.cells;
    if (row.free_bytes == row.total_size) {
      EXPECT_EQ(line.cells, std::string(40, '.'));
    }
    if (allocated == row.total_size) {
      EXPECT_EQ(line.cells, std::string(40, '#'));
    }
  }
  std::size_t larger_elsewhere = 0;
  for (const auto& row : a.segment_map) larger_elsewhere += row.total_size > smallest_drawn;
  EXPECT_LT(larger_elsewhere, shown) << "a segment larger than a drawn one was left out";
  if (shown < segments) {
    EXPECT_TRUE(contains(text, std::to_string(segments - shown) + " smaller segments")) << text;
  }
  const std::string everything = render(a, {.map_rows = 0, .map_width = 16});
  EXPECT_EQ(map_lines(everything).size(), segments);
  EXPECT_FALSE(contains(everything, "smaller segments"));
}

TEST_P(AnalyzeText, CountsAndFiguresAreTheRecordings) {
  const auto& f = GetParam();
  const auto a = metrics::analyze_snapshot(f.read(), 0);
  const std::string text = render(a);
  const auto& t = f.truth;
  EXPECT_TRUE(contains(text.substr(0, text.find('\n')), "run/rank0.pickle"));
  EXPECT_TRUE(contains(text, std::to_string(t["segments"].get<std::uint64_t>()) + " segments")) << text;
  EXPECT_TRUE(contains(text, std::to_string(t["trace_entries"].get<std::uint64_t>()) + " events")) << text;
  EXPECT_TRUE(contains(text, format_bytes(t["total_reserved"].get<std::uint64_t>())));
  EXPECT_TRUE(contains(text, format_bytes(t["largest_free_block"].get<std::uint64_t>())));
  for (const auto& [action, count] : t["trace_actions"].items())
    EXPECT_TRUE(contains(text, action + " " + std::to_string(count.get<std::uint64_t>()))) << action;
  for (const auto& g : a.by_pool_stream) {
    if (g.stream != 0) {
      EXPECT_TRUE(contains(text, fmt::format("0x{:x}", g.stream))) << "stream row missing";
    }
  }
}

TEST_P(AnalyzeText, TheFailedRequestIsExplainedByTheRightComparison) {
  const auto& f = GetParam();
  const auto a = metrics::analyze_snapshot(f.read(), 0);
  const std::string text = render(a);
  if (!f.oom()) {
    EXPECT_FALSE(contains(text, "The failed request"));
    EXPECT_FALSE(contains(text, "OOM at event"));
    return;
  }
  const auto request = f.truth["oom_event"]["size"].get<std::uint64_t>();
  const auto largest = f.truth["largest_free_block"].get<std::uint64_t>();
  const auto free_total = a.totals.inactive_bytes;
  EXPECT_TRUE(contains(text, "OOM at event " + std::to_string(f.truth["oom_event"]["index"].get<std::size_t>())));
  EXPECT_TRUE(contains(text, format_bytes(f.truth["oom_event"]["device_free"].get<std::uint64_t>())));
  // The end state is after the failed step's tensors were freed: the free memory now may or
  // may not hold the request in one piece.
  if (request > largest && request <= free_total) {
    EXPECT_TRUE(contains(text, "larger than any free block")) << text;
  } else if (request <= largest) {
    EXPECT_TRUE(contains(text, "a free block of that size exists now")) << text;
  } else {
    EXPECT_TRUE(contains(text, "more than all free memory together")) << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, AnalyzeText, ::testing::ValuesIn(testing::end_state_fixtures()),
                         testing::fixture_name);

TEST(AnalyzeTextHandBuilt, CellsFollowTheBytesOfEachKind) {
  HandBuiltSnapshot h;
  h.segment(0x200000, {testing::live(2048, 2048), testing::pending(1024), testing::hole(1024)});
  const auto lines = map_lines(render(metrics::analyze_snapshot(h.snap, 0), {.map_rows = 16, .map_width = 8}));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].cells, "####--..");
}

TEST(AnalyzeTextHandBuilt, RequestLargerThanAllFreeMemory) {
  HandBuiltSnapshot h;
  h.segment(0x200000, {testing::live(4 << 20, 4 << 20), testing::hole(2 << 20)});
  h.event(0, snapshot::TraceAction::kOom, 1 << 20, 8 << 20);
  const std::string text = render(metrics::analyze_snapshot(h.snap, 0));
  EXPECT_TRUE(contains(text, "more than all free memory together")) << text;
}

TEST(AnalyzeTextHandBuilt, EmptySnapshotStillSaysSomething) {
  const std::string text = render(metrics::analyze_snapshot(HandBuiltSnapshot().snap, 0));
  EXPECT_TRUE(contains(text, "run/rank0.pickle"));
  EXPECT_TRUE(contains(text, "0 segments"));
  EXPECT_TRUE(map_lines(text).empty());
}

}  // namespace
}  // namespace fragscope::report
