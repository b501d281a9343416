// The telemetry writer: one compact JSON object per line, the fixtures' lines reproduced field
// for field, the fields in a fixed order with the absent ones left out.
#include "inputs/telemetry_writer.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "inputs/telemetry_reader.h"

namespace fragscope::inputs {
namespace {

const std::filesystem::path kFixtures = FRAGSCOPE_FIXTURES_DIR;

TEST(TelemetryWriter, ReproducesEveryFixtureLine) {
  for (const char* scenario : {"calib", "input_bound", "eval_spike"}) {
    SCOPED_TRACE(scenario);
    const auto records = read_telemetry_file(kFixtures / scenario / "steps.jsonl");
    std::ostringstream out;
    write_telemetry(out, records);
    std::istringstream written(out.str());
    std::ifstream original(kFixtures / scenario / "steps.jsonl");
    std::string a, b;
    std::size_t lines = 0;
    while (std::getline(original, a) && std::getline(written, b)) {
      EXPECT_EQ(nlohmann::json::parse(a), nlohmann::json::parse(b));
      ++lines;
    }
    EXPECT_EQ(lines, records.size());
  }
}

TEST(TelemetryWriter, FieldsInTheHooksOrderAbsentOnesLeftOut) {
  StepRecord r;
  r.step = 3;
  r.data_wait_ms = 1.5;
  r.compute_ms = 40;
  r.line = 12;  // where it was read: not a field
  EXPECT_EQ(format_step_record(r), R"({"step":3,"data_wait_ms":1.5,"compute_ms":40.0})");
  r.phase = "eval";
  r.seq_len = 4096;
  r.rank = 1;
  r.memory_stats["num_ooms"] = 0;
  r.extra["host"] = "\"node-7\"";
  EXPECT_EQ(format_step_record(r), R"({"step":3,"seq_len":4096,"data_wait_ms":1.5,"compute_ms":40.0,"phase":"eval",)"
                                   R"("rank":1,"num_ooms":0,"host":"node-7"})");
  std::ostringstream out;
  const StepRecord records[] = {r, r};
  write_telemetry(out, records);
  EXPECT_EQ(out.str(), format_step_record(r) + "\n" + format_step_record(r) + "\n");
}

}  // namespace
}  // namespace fragscope::inputs
