// Step records: the data-wait share, as truth.json defines it, on every recording with
// telemetry (fixtures and held-out runs); the record's defaults; which keys are memory_stats.
#include "inputs/step_telemetry.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "../fixture_support.h"
#include "inputs/telemetry_reader.h"

namespace fragscope::inputs {
namespace {

namespace fs = std::filesystem;

TEST(DataWaitFraction, IsTruthsOnEveryRecording) {
  std::size_t checked = 0;
  for (const auto& entry : fs::directory_iterator(testing::fixtures_dir())) {
    if (!fs::exists(entry.path() / "steps.jsonl")) continue;
    const auto truth = testing::read_json(entry.path() / "truth.json");
    const auto records = read_telemetry_file(entry.path() / "steps.jsonl");
    ASSERT_TRUE(data_wait_fraction(records).has_value()) << entry.path();
    EXPECT_NEAR(*data_wait_fraction(records), truth["data_wait_fraction"].get<double>(), 1e-12) << entry.path();
    ++checked;
  }
  for (const auto& entry : fs::directory_iterator(fs::path(FRAGSCOPE_SOURCE_DIR) / "tests/data/heldout")) {
    const auto label = testing::read_json(entry.path() / "label.json");
    if (!fs::exists(entry.path() / "steps.jsonl") || !label["data_wait_fraction"].is_number()) continue;
    const auto records = read_telemetry_file(entry.path() / "steps.jsonl");
    EXPECT_NEAR(data_wait_fraction(records).value(), label["data_wait_fraction"].get<double>(), 1e-12) << entry.path();
    ++checked;
  }
  EXPECT_GE(checked, 25u);
}

TEST(DataWaitFraction, UndefinedWithoutTime) {
  EXPECT_FALSE(data_wait_fraction({}).has_value());
  std::vector<StepRecord> zero(3);
  EXPECT_FALSE(data_wait_fraction(zero).has_value());
  zero[1].compute_ms = 30;
  zero[2].data_wait_ms = 10;
  EXPECT_DOUBLE_EQ(*data_wait_fraction(zero), 0.25);
}

TEST(DataWaitFraction, SumsOverPartsAreTheJoinedFractionBitForBit) {
  // doctor sums every file of a run without joining their records: the share must not move by an ulp.
  std::vector<StepRecord> joined;
  DataWaitSums sums;
  for (const char* run : {"input_bound", "input_fixed", "calib"}) {
    const auto records = read_telemetry_file(testing::fixtures_dir() / run / "steps.jsonl");
    sums.add(records);
    joined.insert(joined.end(), records.begin(), records.end());
  }
  ASSERT_TRUE(sums.fraction().has_value());
  EXPECT_EQ(*sums.fraction(), *data_wait_fraction(joined));
  EXPECT_FALSE(DataWaitSums{}.fraction().has_value());
}

TEST(StepRecord, DefaultsAreTrainAndTheSumOfTheParts) {
  StepRecord r;
  r.data_wait_ms = 5;
  r.compute_ms = 20;
  EXPECT_EQ(r.phase_or_default(), "train");
  EXPECT_DOUBLE_EQ(r.step_time_or_sum_ms(), 25);
  r.h2d_ms = 2;
  EXPECT_DOUBLE_EQ(r.step_time_or_sum_ms(), 27);
  r.step_time_ms = 40;  // measured wall time wins over the sum
  EXPECT_DOUBLE_EQ(r.step_time_or_sum_ms(), 40);
  r.phase = "eval";
  EXPECT_EQ(r.phase_or_default(), "eval");
  r.memory_stats["num_ooms"] = 1;
  EXPECT_EQ(r.memory_stat("num_ooms"), 1);
  EXPECT_EQ(r.memory_stat("num_alloc_retries"), std::nullopt);
}

TEST(IsMemoryStatsKey, SeparatesARecordedLinesKeys) {
  std::ifstream in(testing::fixtures_dir() / "frag_oom_104" / "steps.jsonl");
  std::string line;
  std::getline(in, line);
  const auto record = nlohmann::json::parse(line);
  std::size_t memory_keys = 0;
  for (const auto& [key, value] : record.items()) {
    // The recorder writes torch.cuda.memory_stats() keys verbatim; its own fields are plain words.
    const bool from_memory_stats = key.find('.') != std::string::npos || key.rfind("num_", 0) == 0;
    EXPECT_EQ(is_memory_stats_key(key), from_memory_stats) << key;
    memory_keys += from_memory_stats;
  }
  EXPECT_GE(memory_keys, 8u);
  for (const char* key :
       {"step", "seq_len", "mbs", "optimizer_step", "data_wait_ms", "compute_ms", "t", "phase", "rank"})
    EXPECT_FALSE(is_memory_stats_key(key)) << key;
  EXPECT_TRUE(is_memory_stats_key("max_split_size"));
  EXPECT_FALSE(is_memory_stats_key("numel")) << "a counter is num_*";
}

// A record's optional numbers take the number's bytes, its texts are shared: 192 bytes without fields of
// its own (it was 368, and a std::map node and a string per memory_stats value).
static_assert(sizeof(StepRecord) <= 192);

TEST(TelemetryFootprint, CountsEachRecordItsFieldsAndEachSharedTextOnce) {
  std::vector<StepRecord> records(3);
  EXPECT_EQ(telemetry_footprint(records), 3 * sizeof(StepRecord));
  records[0].memory_stats["num_ooms"] = 0;
  records[1].phase = "eval";
  const std::size_t own = records[0].memory_stats.heap_bytes();
  EXPECT_EQ(own, sizeof(FieldMap<std::int64_t>::Field));
  const std::size_t texts = records[0].memory_stats.begin()->name.text_bytes() + records[1].phase.text_bytes();
  EXPECT_EQ(telemetry_footprint(records), 3 * sizeof(StepRecord) + own + texts);
  records[2] = records[0];  // a copy shares the name, holds its own values
  EXPECT_EQ(telemetry_footprint(records), 3 * sizeof(StepRecord) + 2 * own + texts);
  EXPECT_EQ(telemetry_footprint({}), 0u);
}

}  // namespace
}  // namespace fragscope::inputs
