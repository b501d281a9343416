// nvidia-smi CSV: the fixtures' single readings and sampled traces, nounits, column order,
// several GPUs, and broken files.
#include "inputs/nvidia_smi_csv.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "inputs/nvidia_smi_trace.h"
#include "util/bytes.h"
#include "util/error.h"

namespace fs = std::filesystem;
using fragscope::InputError;
using fragscope::kMiB;
using namespace fragscope::inputs;

namespace {

const fs::path kFixtures = FRAGSCOPE_FIXTURES_DIR;

std::string error_of(std::string_view csv) {
  try {
    parse_nvidia_smi_csv(csv, "smi.csv");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(NvidiaSmiCsv, SingleReadingOfEveryFixture) {
  std::size_t checked = 0;
  for (const auto& entry : fs::directory_iterator(kFixtures)) {
    if (!fs::exists(entry.path() / "smi.csv")) continue;
    SCOPED_TRACE(entry.path().filename().string());
    const SmiTable table = read_nvidia_smi_csv_file(entry.path() / "smi.csv");
    ASSERT_EQ(table.samples.size(), 1u);
    const auto& s = table.samples[0];
    EXPECT_EQ(s.gpu, 0);
    EXPECT_EQ(s.memory_total, 143771 * kMiB);  // the H200 as nvidia-smi reports it
    ASSERT_TRUE(s.memory_used && s.memory_free);
    EXPECT_LE(*s.memory_used + *s.memory_free, *s.memory_total);
    ASSERT_TRUE(s.utilization_gpu.has_value());
    ++checked;
  }
  EXPECT_GE(checked, 19u);
}

TEST(NvidiaSmiCsv, OomReadingShowsTheDriverFreeFigure) {
  const SmiTable table = read_nvidia_smi_csv_file(kFixtures / "frag_oom_104" / "smi.csv");
  const auto& s = table.samples[0];
  EXPECT_EQ(s.memory_used, 142139 * kMiB);
  EXPECT_EQ(s.memory_free, 1018 * kMiB);
  EXPECT_EQ(s.utilization_gpu, 51.0);
  EXPECT_EQ(s.timestamp, "2026/11/29 10:34:35.378");
  // The OOM fixture's driver-reported free bytes (truth oom_event.device_free) print as 1017.12 MiB.
  std::ifstream in(kFixtures / "frag_oom_104" / "truth.json");
  const auto truth = nlohmann::json::parse(in);
  EXPECT_NEAR(double(*s.memory_free), truth["oom_event"]["device_free"].get<double>(), double(kMiB));
  EXPECT_EQ((std::vector<std::string>{"timestamp", "memory.used", "memory.free", "memory.total",
                                      "utilization.gpu"}),
            table.columns);
}

TEST(NvidiaSmiCsv, InputBoundTraceIsMostlyIdleInputFixedIsBusy) {
  const auto bound = summarize_smi_trace(read_nvidia_smi_csv_file(kFixtures / "input_bound" / "smi_trace.csv"));
  const auto fixed = summarize_smi_trace(read_nvidia_smi_csv_file(kFixtures / "input_fixed" / "smi_trace.csv"));
  ASSERT_EQ(bound.size(), 1u);
  ASSERT_EQ(fixed.size(), 1u);
  EXPECT_EQ(bound[0].samples, 442u);
  EXPECT_EQ(fixed[0].samples, 153u);
  // input_bound waits for data 93% of each step: the GPU idles most of its busy window.
  EXPECT_GT(*bound[0].idle_fraction, 0.7);
  EXPECT_LT(*bound[0].utilization_mean, 20.0);
  // input_fixed: once training starts the GPU never drops below 10%.
  EXPECT_LT(*fixed[0].idle_fraction, 0.10);
  EXPECT_GT(*fixed[0].utilization_p50, 70.0);
  EXPECT_GT(*fixed[0].window_seconds, 2.0);
  EXPECT_EQ(fixed[0].memory_total, 143771 * kMiB);
  EXPECT_GT(*fixed[0].memory_used_peak, 10000 * kMiB);
}

TEST(NvidiaSmiCsv, NounitsReorderedSubsetWithIndexAndNotAvailable) {
  const auto table = parse_nvidia_smi_csv(
      "index, utilization.gpu [%], memory.used [MiB], name, memory.total [MiB]\n"
      "0, 77, 51189, NVIDIA H200, 143771\n"
      "1, [N/A], 100, NVIDIA H200, 143771\n"
      "1, 5, [Not Supported], NVIDIA H200, 143771\n",
      "smi.csv");
  ASSERT_EQ(table.samples.size(), 3u);
  EXPECT_EQ(table.samples[0].gpu, 0);
  EXPECT_EQ(table.samples[0].utilization_gpu, 77.0);
  EXPECT_EQ(table.samples[0].memory_used, 51189 * kMiB);
  EXPECT_EQ(table.samples[0].other.at("name"), "NVIDIA H200");
  EXPECT_FALSE(table.samples[0].timestamp.has_value());
  EXPECT_EQ(table.samples[1].gpu, 1);
  EXPECT_FALSE(table.samples[1].utilization_gpu.has_value());
  EXPECT_FALSE(table.samples[2].memory_used.has_value());
  const auto summaries = summarize_smi_trace(table);
  ASSERT_EQ(summaries.size(), 2u);
  EXPECT_EQ(summaries[1].gpu, 1);
  EXPECT_EQ(summaries[1].utilization_samples, 1u);
  EXPECT_EQ(summaries[1].idle_fraction, 1.0);  // never busy
  EXPECT_EQ(summaries[1].memory_used_peak, 100 * kMiB);
}

TEST(NvidiaSmiCsv, GpusWithoutIndexColumnAreToldApartBySharedTimestamps) {
  const auto table = parse_nvidia_smi_csv(
      "timestamp, utilization.gpu [%]\n"
      "2026/11/29 10:36:32.823, 90 %\n2026/11/29 10:36:32.823, 5 %\n"
      "2026/11/29 10:36:32.923, 91 %\n2026/11/29 10:36:32.923, 6 %\n",
      "smi.csv");
  ASSERT_EQ(table.samples.size(), 4u);
  EXPECT_EQ(table.samples[1].gpu, 1);
  EXPECT_EQ(table.samples[2].gpu, 0);
  EXPECT_NEAR(*table.samples[2].time_s - *table.samples[0].time_s, 0.1, 1e-6);
}

TEST(NvidiaSmiCsv, TimestampsAndTruncatedTail) {
  EXPECT_DOUBLE_EQ(*parse_smi_timestamp("1970/01/02 00:00:01.5"), 86401.5);
  EXPECT_FALSE(parse_smi_timestamp("yesterday").has_value());
  EXPECT_FALSE(parse_smi_timestamp("2026/13/29 10:36:32.823").has_value());
  const auto table = parse_nvidia_smi_csv(
      "timestamp, utilization.gpu [%]\n2026/11/29 10:36:32.823, 90 %\n2026/11/29 10:36:3", "smi.csv");
  EXPECT_EQ(table.samples.size(), 1u);  // a trace killed mid-line keeps its complete rows
}

TEST(NvidiaSmiCsv, BrokenInputNamesFileAndLine) {
  EXPECT_EQ(error_of(""), "smi.csv: no nvidia-smi samples");
  EXPECT_EQ(error_of("timestamp, memory.used [MiB]\n"), "smi.csv: no nvidia-smi samples");
  EXPECT_TRUE(error_of("0, 77 %, 51189 MiB\n").starts_with("smi.csv:1: no nvidia-smi header line"));
  EXPECT_EQ(error_of("memory.used [MiB], utilization.gpu [%]\n1 MiB, 2 %, 3\n4 MiB, 5 %\n"),
            "smi.csv:2: 3 fields where the header has 2");
  EXPECT_EQ(error_of("memory.used [MiB]\nlots\n"), "smi.csv:2: column memory.used: cannot read \"lots\"");
  EXPECT_EQ(error_of("utilization.gpu [%]\n140 %\n"), "smi.csv:2: column utilization.gpu: cannot read \"140 %\"");
  EXPECT_EQ(error_of("index, utilization.gpu [%]\n-1, 3 %\n"), "smi.csv:2: column index: cannot read \"-1\"");
}
