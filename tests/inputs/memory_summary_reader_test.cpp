// torch.cuda.memory_summary() text, checked cell by cell against stats.json of the same run.
#include "inputs/memory_summary_reader.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "inputs/memory_stats_reader.h"
#include "util/error.h"

namespace fs = std::filesystem;
using fragscope::InputError;
using namespace fragscope::inputs;

namespace {
const fs::path kFixtures = FRAGSCOPE_FIXTURES_DIR;
}

TEST(MemorySummaryReader, EveryCellOfEveryFixtureMatchesStatsJson) {
  std::size_t fixtures = 0;
  for (const auto& entry : fs::directory_iterator(kFixtures)) {
    if (!fs::exists(entry.path() / "summary.txt")) continue;
    SCOPED_TRACE(entry.path().filename().string());
    const MemorySummary summary = read_memory_summary_file(entry.path() / "summary.txt");
    const MemoryStats stats = read_memory_stats_file(entry.path() / "stats.json");
    EXPECT_EQ(summary.device, 0);
    EXPECT_EQ(summary.num_ooms, stats.num_ooms);
    EXPECT_EQ(summary.num_alloc_retries, stats.num_alloc_retries);
    ASSERT_EQ(summary.rows.size(), 29u);  // 9 pooled metrics × 3 rows + 2 oversize rows
    for (const auto& row : summary.rows) {
      SCOPED_TRACE(row.stat_key);
      EXPECT_TRUE(row.current.matches(*stats.get(row.stat_key + ".current")));
      EXPECT_TRUE(row.peak.matches(*stats.get(row.stat_key + ".peak")));
      EXPECT_TRUE(row.allocated.matches(*stats.get(row.stat_key + ".allocated")));
      EXPECT_TRUE(row.freed.matches(*stats.get(row.stat_key + ".freed")));
    }
    ++fixtures;
  }
  EXPECT_GE(fixtures, 19u);
}

TEST(MemorySummaryReader, CalibCellsAsPrinted) {
  const MemorySummary summary = read_memory_summary_file(kFixtures / "calib" / "summary.txt");
  const SummaryRow* reserved = summary.find("reserved_bytes.all");
  ASSERT_NE(reserved, nullptr);
  EXPECT_EQ(reserved->metric, "GPU reserved memory");
  EXPECT_TRUE(reserved->bytes);
  EXPECT_EQ(reserved->current.value, 50416u);
  EXPECT_EQ(reserved->current.unit, 1u << 20);
  EXPECT_EQ(reserved->freed.value, 0u);
  EXPECT_EQ(reserved->freed.unit, 1u);  // "0 B"
  const SummaryRow* small = summary.find("allocated_bytes.small_pool");
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(small->allocated.unit, 1u << 30);  // unit chosen by the "all" row
  const SummaryRow* segments = summary.find("segment.large_pool");
  ASSERT_NE(segments, nullptr);
  EXPECT_FALSE(segments->bytes);
  EXPECT_EQ(segments->current.value, 664u);
  const SummaryRow* oversize = summary.find("oversize_segments");
  ASSERT_NE(oversize, nullptr);
  EXPECT_EQ(oversize->pool, "");
}

TEST(MemorySummaryReader, OldUnitsThousandsAndSurroundingLog) {
  const auto summary = parse_memory_summary(
      "some log line\n"
      "|            CUDA OOMs: 1            |        cudaMalloc retries: 1         |\n"
      "| Allocated memory      |    1062 MB |    4877 MB |   89299 MB |   88237 MB |\n"
      "|       from large pool |    1048 MB |    4865 MB |   89263 MB |   88215 MB |\n"
      "| Allocations           |     445    |    1104    |    1234 K  |    1233 K  |\n"
      "more log\n",
      "log.txt");
  EXPECT_EQ(summary.num_ooms, 1);
  ASSERT_EQ(summary.rows.size(), 3u);
  EXPECT_EQ(summary.rows[0].current.unit, 1u << 20);
  EXPECT_EQ(summary.rows[1].stat_key, "allocated_bytes.large_pool");
  EXPECT_EQ(summary.rows[2].allocated.unit, 1000u);
  EXPECT_TRUE(summary.rows[2].allocated.matches(1234567));
  EXPECT_FALSE(summary.rows[2].allocated.matches(1235000));
  EXPECT_EQ(summary.rows[2].line, 5u);
}

TEST(MemorySummaryReader, BrokenInput) {
  try {
    parse_memory_summary("nothing\n", "summary.txt");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "summary.txt: no memory_summary table (torch.cuda.memory_summary() output)");
  }
  try {
    parse_memory_summary("| Allocated memory      |  lots MiB |  1 MiB |  1 MiB |  1 MiB |\n", "summary.txt");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "summary.txt:1: cannot read \"lots MiB\" in the Allocated memory row");
  }
}

// Issue 16: "device ID 4294967297" was cut to 32 bits (device 1) and read without complaint.
TEST(MemorySummaryReader, DeviceIdIsCheckedBeforeItIsNarrowed) {
  const std::string table = "| Allocated memory      |    1062 MB |    4877 MB |   89299 MB |   88237 MB |\n";
  EXPECT_EQ(parse_memory_summary("|  PyTorch CUDA memory summary, device ID 7  |\n" + table, "s.txt").device, 7);
  for (const std::string id : {"4294967297", "-1", "4097", "99999999999999999999"}) {
    SCOPED_TRACE(id);
    try {
      parse_memory_summary("|  PyTorch CUDA memory summary, device ID " + id + "  |\n" + table, "s.txt");
      FAIL() << "expected InputError";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), "s.txt:1: device ID " + id + " out of range (0 to 4096)");
    }
  }
}
