// The text chart of reserved / allocated bytes: one column per point, a cell filled when the
// value reaches the middle of its band, '█' for allocated over '░' for cached-only. Checked on
// points built by hand and on the timeline of a real replay (frag_oom_104).
#include "report/timeline_chart.h"

#include <algorithm>
#include <sstream>

#include <gtest/gtest.h>

#include "../fixture_snapshots.h"
#include "replay/capacity.h"
#include "replay/prepared_trace.h"
#include "util/bytes.h"

namespace fragscope::report {
namespace {

using replay::TimelinePoint;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// The cells of a chart row: what follows "┤", as one string per column (UTF-8 glyphs).
std::vector<std::string> cells(const std::string& line) {
  const std::string axis = "┤";
  const auto at = line.find(axis);
  EXPECT_NE(at, std::string::npos) << line;
  std::vector<std::string> out;
  for (std::size_t i = at + axis.size(); i < line.size();) {
    const std::size_t n = static_cast<unsigned char>(line[i]) >= 0xE0 ? 3 : 1;  // █ and ░ are 3 bytes
    out.push_back(line.substr(i, n));
    i += n;
  }
  return out;
}

std::string chart(const std::vector<TimelinePoint>& points, int rows) {
  std::ostringstream out;
  write_timeline_chart(out, points, rows);
  return out.str();
}

TEST(TimelineChart, ColumnHeightsFollowTheBytes) {
  const std::uint64_t top = 8 * kGiB;
  const std::vector<TimelinePoint> points = {
      {0, 9, top, top},          // all allocated: full column of █
      {10, 19, top, 0},          // all cached: full column of ░
      {20, 29, top * 7 / 16, top * 3 / 16},  // 3.5 GiB reserved, 1.5 GiB allocated
      {30, 39, 0, 0},            // nothing
  };
  const auto lines = lines_of(chart(points, 4));
  ASSERT_EQ(lines.size(), 6u);  // 4 rows, the axis, the legend
  // Row r (from the top, r = 4..1) is filled when the value ≥ (r − 0.5) / 4 × 8 GiB.
  const std::vector<std::vector<std::string>> expected = {
      {"█", "░", " ", " "},  // ≥ 7 GiB
      {"█", "░", " ", " "},  // ≥ 5 GiB
      {"█", "░", "░", " "},  // ≥ 3 GiB: 3.5 GiB reserved reaches the middle of the band
      {"█", "░", "█", " "},  // ≥ 1 GiB: 1.5 GiB allocated
  };
  for (std::size_t r = 0; r < 4; ++r) EXPECT_EQ(cells(lines[r]), expected[r]) << lines[r];
  EXPECT_NE(lines[0].find(format_bytes(top)), std::string::npos) << "top of the scale";
  EXPECT_NE(lines[3].find(" 0 "), std::string::npos) << "bottom of the scale";
  EXPECT_NE(lines[5].find("0 … 39"), std::string::npos) << "event range";
}

TEST(TimelineChart, NothingToDrawWritesNothing) {
  EXPECT_EQ(chart({}, 8), "");
  EXPECT_EQ(chart({{0, 5, 0, 0}, {6, 9, 0, 0}}, 8), "");  // all zero: no scale
  EXPECT_EQ(chart({{0, 5, kGiB, kGiB}}, 0), "");
}

TEST(TimelineChart, RealReplayPeaksReachTheTopRow) {
  const auto path = testing::fixtures_dir() / "frag_oom_104" / "snapshot.pickle.zst";
  const auto trace = replay::prepare_trace(testing::fixture_snapshot(path), 0, path.string());
  const auto result = replay::run_replay(trace, replay::ModelKind::kCaching, trace.recorded_config,
                                         replay::replay_options_for(replay::resolve_capacity(trace, {})));
  ASSERT_FALSE(result.timeline.empty());
  const auto lines = lines_of(chart(result.timeline, 8));
  ASSERT_EQ(lines.size(), 10u);
  const auto top_row = cells(lines[0]);
  ASSERT_EQ(top_row.size(), result.timeline.size());
  const auto peak = std::max_element(result.timeline.begin(), result.timeline.end(),
                                     [](const auto& a, const auto& b) { return a.reserved < b.reserved; });
  EXPECT_NE(top_row[static_cast<std::size_t>(peak - result.timeline.begin())], " ") << "the peak column is full";
  EXPECT_NE(lines[0].find(format_bytes(peak->reserved)), std::string::npos);
  // The first point of the run holds almost nothing: its column is empty at the top.
  EXPECT_EQ(top_row.front(), " ");
  const auto range = std::to_string(result.timeline.front().first_trace_index) + " … " +
                     std::to_string(result.timeline.back().last_trace_index);
  EXPECT_NE(lines.back().find(range), std::string::npos) << lines.back();
}

}  // namespace
}  // namespace fragscope::report
