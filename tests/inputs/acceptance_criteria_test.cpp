// The acceptance criteria file: defaults, every key, round trip, and one-line errors.
#include "inputs/acceptance_criteria.h"

#include <sstream>

#include <gtest/gtest.h>

#include "util/error.h"

using fragscope::InputError;
using namespace fragscope::inputs;

namespace {

std::string error_of(std::string_view json) {
  try {
    parse_acceptance_criteria(json, "criteria.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(AcceptanceCriteria, VersionAloneGivesTheCanaryPlanDefaults) {
  const auto c = parse_acceptance_criteria(R"({"version": 1})", "criteria.json");
  EXPECT_FALSE(c.device_memory_bytes.has_value());
  EXPECT_DOUBLE_EQ(c.max_hbm_fraction, 0.90);
  EXPECT_DOUBLE_EQ(c.max_data_wait_fraction, 0.10);
  EXPECT_DOUBLE_EQ(c.max_gpu_idle_fraction, 0.10);
  EXPECT_FALSE(c.allow_oom);
  EXPECT_EQ(c.max_alloc_retries, 0);
  EXPECT_EQ(c.required_phases, (std::vector<std::string>{"train", "eval", "checkpoint"}));
  EXPECT_DOUBLE_EQ(c.max_step_time_spread, 0.15);
  EXPECT_DOUBLE_EQ(c.max_throughput_spread, 0.15);
  EXPECT_EQ(c.warmup_steps, 2);
}

TEST(AcceptanceCriteria, TheSharedFormatExampleReadsKeyByKey) {
  const auto c = parse_acceptance_criteria(R"({ "version": 1,
    "device_memory_bytes": 85899345920, "max_hbm_fraction": 0.85, "max_data_wait_fraction": 0.05,
    "max_gpu_idle_fraction": 0.2, "allow_oom": true, "max_alloc_retries": 3,
    "required_phases": ["train", "eval"], "max_step_time_spread": 0.3,
    "max_throughput_spread": 0.25, "warmup_steps": 5 })", "criteria.json");
  EXPECT_EQ(c.device_memory_bytes, 85899345920u);
  EXPECT_DOUBLE_EQ(c.max_hbm_fraction, 0.85);
  EXPECT_DOUBLE_EQ(c.max_data_wait_fraction, 0.05);
  EXPECT_DOUBLE_EQ(c.max_gpu_idle_fraction, 0.2);
  EXPECT_TRUE(c.allow_oom);
  EXPECT_EQ(c.max_alloc_retries, 3);
  EXPECT_EQ(c.required_phases, (std::vector<std::string>{"train", "eval"}));
  EXPECT_DOUBLE_EQ(c.max_step_time_spread, 0.3);
  EXPECT_DOUBLE_EQ(c.max_throughput_spread, 0.25);
  EXPECT_EQ(c.warmup_steps, 5);
  EXPECT_EQ(parse_acceptance_criteria(R"({"version": 1, "device_memory_bytes": "80 GiB"})", "c")
                .device_memory_bytes, 85899345920u);
}

TEST(AcceptanceCriteria, WriterRoundTrips) {
  AcceptanceCriteria c;
  c.device_memory_bytes = 150109880320;
  c.required_phases = {"train", "checkpoint"};
  c.max_step_time_spread = 0.25;
  c.warmup_steps = 1;
  std::ostringstream out;
  write_acceptance_criteria(out, c);
  const auto back = parse_acceptance_criteria(out.str(), "written");
  EXPECT_EQ(back.device_memory_bytes, c.device_memory_bytes);
  EXPECT_EQ(back.required_phases, c.required_phases);
  EXPECT_DOUBLE_EQ(back.max_step_time_spread, 0.25);
  EXPECT_EQ(back.warmup_steps, 1);
  std::ostringstream again;
  write_acceptance_criteria(again, back);
  EXPECT_EQ(again.str(), out.str());
}

TEST(AcceptanceCriteria, TheJsonObjectIsTheFileWritten) {
  AcceptanceCriteria c;
  c.device_memory_bytes = 150109880320;
  c.max_hbm_fraction = 0.85;
  const nlohmann::ordered_json j = acceptance_criteria_json(c);
  std::ostringstream out;
  write_acceptance_criteria(out, c);
  EXPECT_EQ(j.dump(2) + "\n", out.str());
  EXPECT_EQ(j.begin().key(), "version");  // the file's key order
  EXPECT_EQ(j.at("device_memory_bytes"), 150109880320ull);
  EXPECT_EQ(j.size(), 11u);  // every key
}

TEST(AcceptanceCriteria, ErrorsNameTheFileAndTheKey) {
  EXPECT_EQ(error_of(R"({})"), "criteria.json: missing \"version\" (this fragscope reads version 1)");
  EXPECT_EQ(error_of(R"({"version": 2})"),
            "criteria.json: unsupported \"version\" 2 (this fragscope reads version 1)");
  EXPECT_TRUE(error_of(R"({"version": 1, "max_hbm_fracton": 0.9})")
                  .starts_with("criteria.json: unknown key \"max_hbm_fracton\" (known: version, "));
  EXPECT_EQ(error_of(R"({"version": 1, "max_hbm_fraction": 1.5})"),
            "criteria.json: \"max_hbm_fraction\" must be a fraction in (0, 1], found 1.5");
  EXPECT_EQ(error_of(R"({"version": 1, "max_hbm_fraction": 0})"),
            "criteria.json: \"max_hbm_fraction\" must be a fraction in (0, 1], found 0");
  EXPECT_EQ(error_of(R"({"version": 1, "max_data_wait_fraction": "10%"})"),
            "criteria.json: \"max_data_wait_fraction\" must be a number, found \"10%\"");
  EXPECT_EQ(error_of(R"({"version": 1, "allow_oom": 0})"),
            "criteria.json: \"allow_oom\" must be true or false, found 0");
  EXPECT_EQ(error_of(R"({"version": 1, "warmup_steps": -1})"),
            "criteria.json: \"warmup_steps\" must be a non-negative integer, found -1");
  EXPECT_EQ(error_of(R"({"version": 1, "max_alloc_retries": 1.5})"),
            "criteria.json: \"max_alloc_retries\" must be a non-negative integer, found 1.5");
  EXPECT_EQ(error_of(R"({"version": 1, "required_phases": ["train", "\u001b[2J\nrank 0 pass"]})"),
            "criteria.json: \"required_phases\" must hold phase names, each a name without control characters, "
            "found \"\\u001b[2J\\nrank 0 pass\"");
  EXPECT_EQ(error_of(R"({"version": 1, "required_phases": [")" + std::string(65, 'Q') + "\"]}"),
            "criteria.json: \"required_phases\" must hold phase names, each a name of at most 64 bytes, found \"" +
                std::string(59, 'Q') + "...");
  EXPECT_EQ(error_of(R"({"version": 1, "required_phases": "train"})"),
            "criteria.json: \"required_phases\" must be a list of phase names, found \"train\"");
  EXPECT_EQ(error_of(R"({"version": 1, "required_phases": ["train", ""]})"),
            "criteria.json: \"required_phases\" must hold non-empty strings, found \"\"");
  EXPECT_EQ(error_of(R"({"version": 1, "max_step_time_spread": -0.1})"),
            "criteria.json: \"max_step_time_spread\" must be a non-negative number, found -0.1");
  EXPECT_EQ(error_of(R"({"version": 1, "device_memory_bytes": "lots"})"),
            "criteria.json: \"device_memory_bytes\" must be a positive byte count (85899345920 or \"80 GiB\"), "
            "found \"lots\"");
  EXPECT_EQ(error_of("[1]"), "criteria.json: acceptance criteria must be a JSON object, found array");
  const auto invalid = error_of("{\"version\": 1,\n");
  EXPECT_TRUE(invalid.starts_with("criteria.json: invalid JSON: ")) << invalid;
  EXPECT_EQ(invalid.find('\n'), std::string::npos);
  EXPECT_THROW(read_acceptance_criteria_file("/nonexistent/criteria.json"), InputError);
}
