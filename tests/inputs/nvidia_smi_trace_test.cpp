// summarize_smi_trace on the recorded 100 ms traces, against the same figures worked out here
// from the CSV text: the busy window (first to last sample at or above 10%), the idle share
// inside it, the mean, the window's length and the memory peaks.
#include "inputs/nvidia_smi_trace.h"

#include <fstream>
#include <regex>

#include <gtest/gtest.h>

#include "../fixture_support.h"
#include "util/bytes.h"

namespace fragscope::inputs {
namespace {

struct Row {
  double seconds = 0;  ///< time of day
  double used_mib = 0;
  double total_mib = 0;
  double utilization = 0;
};

/// "2026/11/29 10:36:32.823, 529 MiB, 142628 MiB, 143771 MiB, 0 %" (used, free, total, util).
std::vector<Row> rows_of(const std::string& scenario) {
  std::ifstream in(testing::fixtures_dir() / scenario / "smi_trace.csv");
  static const std::regex row(R"(^\d+/\d+/\d+ (\d+):(\d+):([\d.]+), (\d+) MiB, \d+ MiB, (\d+) MiB, (\d+) %)");
  std::vector<Row> rows;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    rows.push_back({std::stod(m[1]) * 3600 + std::stod(m[2]) * 60 + std::stod(m[3]), std::stod(m[4]), std::stod(m[5]),
                    std::stod(m[6])});
  }
  return rows;
}

class RecordedSmiTrace : public ::testing::TestWithParam<std::string> {};

TEST_P(RecordedSmiTrace, SummaryIsTheBusyWindowsArithmetic) {
  const auto rows = rows_of(GetParam());
  ASSERT_GT(rows.size(), 100u);
  std::size_t first = rows.size(), last = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].utilization >= 10) {
      first = std::min(first, i);
      last = i;
    }
  }
  ASSERT_LT(first, rows.size());
  std::size_t idle = 0;
  double sum = 0, used_peak = 0;
  for (std::size_t i = first; i <= last; ++i) {
    idle += rows[i].utilization < 10;
    sum += rows[i].utilization;
  }
  for (const Row& r : rows) used_peak = std::max(used_peak, r.used_mib);
  const std::size_t window = last - first + 1;

  const auto summaries =
      summarize_smi_trace(read_nvidia_smi_csv_file(testing::fixtures_dir() / GetParam() / "smi_trace.csv"));
  ASSERT_EQ(summaries.size(), 1u);
  const SmiGpuSummary& s = summaries[0];
  EXPECT_EQ(s.gpu, 0);
  EXPECT_EQ(s.samples, rows.size());
  EXPECT_EQ(s.utilization_samples, rows.size());
  EXPECT_EQ(s.window_samples, window);
  EXPECT_DOUBLE_EQ(s.idle_fraction.value(), static_cast<double>(idle) / static_cast<double>(window));
  EXPECT_NEAR(s.utilization_mean.value(), sum / static_cast<double>(window), 1e-9);
  EXPECT_NEAR(s.window_seconds.value(), rows[last].seconds - rows[first].seconds, 1e-6);
  EXPECT_EQ(s.memory_used_peak, static_cast<std::uint64_t>(used_peak) * kMiB);
  EXPECT_EQ(s.memory_total, static_cast<std::uint64_t>(rows[0].total_mib) * kMiB);
  EXPECT_LE(s.utilization_p50.value(), s.utilization_p90.value());
}

INSTANTIATE_TEST_SUITE_P(Recorded, RecordedSmiTrace, ::testing::Values("input_bound", "input_fixed"));

TEST(SmiTrace, ThresholdIsAnOption) {
  const auto table = parse_nvidia_smi_csv(
      "timestamp, utilization.gpu [%]\n"
      "2026/11/29 10:00:00.000, 0 %\n2026/11/29 10:00:00.100, 30 %\n2026/11/29 10:00:00.200, 20 %\n"
      "2026/11/29 10:00:00.300, 30 %\n2026/11/29 10:00:00.400, 0 %\n",
      "smi.csv");
  const auto at_10 = summarize_smi_trace(table);
  EXPECT_EQ(at_10.at(0).window_samples, 3u);  // 30 20 30: the idle ends are outside the window
  EXPECT_EQ(at_10.at(0).idle_fraction, 0.0);
  EXPECT_NEAR(at_10.at(0).window_seconds.value(), 0.2, 1e-6);  // epoch seconds in a double: µs precision
  const auto at_25 = summarize_smi_trace(table, {.idle_below_percent = 25});
  EXPECT_EQ(at_25.at(0).window_samples, 3u);
  EXPECT_DOUBLE_EQ(at_25.at(0).idle_fraction.value(), 1.0 / 3.0);  // 20% is idle at a 25% threshold
}

TEST(SmiTrace, ASampleAtTheThresholdIsBusy) {
  const auto table = parse_nvidia_smi_csv(
      "timestamp, utilization.gpu [%]\n"
      "2026/11/29 10:00:00.000, 0 %\n2026/11/29 10:00:00.100, 10 %\n2026/11/29 10:00:00.200, 50 %\n"
      "2026/11/29 10:00:00.300, 9 %\n2026/11/29 10:00:00.400, 10 %\n2026/11/29 10:00:00.500, 0 %\n",
      "smi.csv");
  const auto s = summarize_smi_trace(table).at(0);
  EXPECT_EQ(s.window_samples, 4u);  // 10 50 9 10
  EXPECT_DOUBLE_EQ(s.idle_fraction.value(), 0.25);
}

}  // namespace
}  // namespace fragscope::inputs
