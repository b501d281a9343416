// Step telemetry JSONL: every fixture's steps.jsonl, data_wait_fraction against truth.json,
// the hook's optional fields, the writer round trip, and bad lines.
#include "inputs/telemetry_reader.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "inputs/telemetry_writer.h"
#include "inputs/text_file.h"
#include "util/error.h"

namespace fs = std::filesystem;
using fragscope::InputError;
using namespace fragscope::inputs;

namespace {

const fs::path kFixtures = FRAGSCOPE_FIXTURES_DIR;

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::string error_of(const std::string& jsonl) {
  std::istringstream in(jsonl);
  try {
    read_telemetry(in, "rank0.jsonl");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(TelemetryReader, EveryFixtureMatchesTruthDataWaitFraction) {
  std::size_t checked = 0;
  for (const auto& entry : fs::directory_iterator(kFixtures)) {
    const auto steps = entry.path() / "steps.jsonl";
    if (!fs::exists(steps)) continue;
    SCOPED_TRACE(entry.path().filename().string());
    const auto truth = read_json(entry.path() / "truth.json");
    const auto records = read_telemetry_file(steps);
    EXPECT_EQ(records.size(), truth["steps_recorded"].get<std::size_t>());
    const auto fraction = data_wait_fraction(records);
    ASSERT_TRUE(fraction.has_value());
    EXPECT_NEAR(*fraction, truth["data_wait_fraction"].get<double>(), 1e-9);
    // The last record carries the end-of-run counters of stats.json.
    EXPECT_EQ(records.back().memory_stat("num_ooms"), 0);  // written before any OOM
    EXPECT_EQ(records.front().line, 1u);
    EXPECT_EQ(records.back().phase_or_default(), "train");
    ++checked;
  }
  EXPECT_GE(checked, 19u);
}

TEST(TelemetryReader, FieldsOfTheFirstCalibRecord) {
  const auto records = read_telemetry_file(kFixtures / "calib" / "steps.jsonl");
  ASSERT_EQ(records.size(), 32u);
  const auto& r = records[0];
  EXPECT_EQ(r.step, 0);
  EXPECT_EQ(r.seq_len, 2584);
  EXPECT_EQ(r.mbs, 4);
  EXPECT_EQ(r.optimizer_step, false);
  EXPECT_DOUBLE_EQ(r.data_wait_ms, 8.466620000000091);
  EXPECT_DOUBLE_EQ(r.compute_ms, 2929.5102100000036);
  EXPECT_DOUBLE_EQ(*r.t, 2.9384608268737793);
  EXPECT_EQ(r.memory_stat("reserved_bytes.all.current"), 32872857600);
  EXPECT_EQ(r.memory_stat("segment.all.current"), 516);
  EXPECT_EQ(r.memory_stats.size(), 10u);
  EXPECT_TRUE(r.extra.empty());
  EXPECT_EQ(records[3].optimizer_step, true);
  // The peak of the last record is the run's max_memory_reserved.
  const auto truth = read_json(kFixtures / "calib" / "truth.json");
  EXPECT_EQ(records.back().memory_stat("reserved_bytes.all.peak"), truth["max_memory_reserved"].get<std::int64_t>());
}

TEST(TelemetryReader, HookFieldsAndUnknownFieldsSurviveARoundTrip) {
  const std::string line =
      R"({"step": 7, "seq_len": 4096, "mbs": 2, "optimizer_step": true, "data_wait_ms": 1.5, )"
      R"("compute_ms": 40.25, "t": 12.5, "phase": "eval", "rank": 3, "local_rank": 1, "tokens": 8192, )"
      R"("max_seq_len": 4096, "h2d_ms": 0.75, "queue_depth": 4, "samples_per_s": 48.5, )"
      R"("tokens_per_s": 198656.0, "step_time_ms": 42.5, "device_total_bytes": 150109880320, )"
      R"("reserved_bytes.all.peak": 52865007616, "num_alloc_retries": 2, "host": "node-7", )"
      R"("gpu_util": [90, 91], "note": null})";
  const StepRecord r = parse_step_record(line, "x.jsonl", 1);
  EXPECT_EQ(r.phase, "eval");
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.tokens, 8192);
  EXPECT_EQ(r.queue_depth, 4);
  EXPECT_EQ(r.device_total_bytes, 150109880320);
  EXPECT_DOUBLE_EQ(*r.h2d_ms, 0.75);
  EXPECT_DOUBLE_EQ(r.step_time_or_sum_ms(), 42.5);
  EXPECT_EQ(r.memory_stat("num_alloc_retries"), 2);
  ASSERT_EQ(r.extra.size(), 2u);
  EXPECT_EQ(r.extra.at("host"), "\"node-7\"");
  EXPECT_EQ(r.extra.at("gpu_util"), "[90,91]");

  const std::string written = format_step_record(r);
  EXPECT_EQ(written.find('\n'), std::string::npos);
  const StepRecord back = parse_step_record(written, "written", 1);
  EXPECT_EQ(format_step_record(back), written);
  auto expected = nlohmann::json::parse(line);
  expected.erase("note");  // null = not measured: dropped
  EXPECT_EQ(nlohmann::json::parse(written), expected);
}

TEST(TelemetryReader, StepTimeFallsBackToTheSumOfItsParts) {
  StepRecord r;
  r.data_wait_ms = 2;
  r.compute_ms = 30;
  EXPECT_DOUBLE_EQ(r.step_time_or_sum_ms(), 32);
  r.h2d_ms = 1;
  EXPECT_DOUBLE_EQ(r.step_time_or_sum_ms(), 33);
  EXPECT_FALSE(data_wait_fraction({}).has_value());
}

TEST(TelemetryReader, BadLinesNameFileAndLine) {
  EXPECT_EQ(error_of(""), "rank0.jsonl: no telemetry records");
  EXPECT_EQ(error_of("\n  \n"), "rank0.jsonl: no telemetry records");
  const std::string good = R"({"step": 0, "data_wait_ms": 1, "compute_ms": 2})";
  EXPECT_TRUE(error_of(good + "\n\n" + "{\"step\": 1,\n").starts_with("rank0.jsonl:3: invalid JSON"));
  EXPECT_EQ(error_of(good + "\n[1]\n"), "rank0.jsonl:2: expected a JSON object, found array");
  EXPECT_EQ(error_of(R"({"data_wait_ms": 1})"), "rank0.jsonl:1: missing field \"step\"");
  EXPECT_EQ(error_of(R"({"step": "0"})"), "rank0.jsonl:1: field \"step\" must be an integer, found \"0\"");
  EXPECT_EQ(error_of(R"({"step": 0, "compute_ms": "fast"})"),
            "rank0.jsonl:1: field \"compute_ms\" must be a number, found \"fast\"");
  EXPECT_EQ(error_of(R"({"step": 0, "phase": 3})"), "rank0.jsonl:1: field \"phase\" must be a string, found 3");
  EXPECT_EQ(error_of(R"({"step": 0, "phase": "\u001b[2Jeval"})"),
            "rank0.jsonl:1: field \"phase\" must be a name without control characters, found \"\\u001b[2Jeval\"");
  EXPECT_EQ(error_of(R"({"step": 0, "phase": "ev\u009bal"})"),
            "rank0.jsonl:1: field \"phase\" must be a name without control characters, found \"ev??al\"");
  EXPECT_EQ(error_of(R"({"step": 0, "phase": ")" + std::string(65, 'e') + "\"}"),
            "rank0.jsonl:1: field \"phase\" must be a name of at most 64 bytes, found \"" + std::string(59, 'e') +
                "...");
  EXPECT_EQ(parse_step_record(R"({"step": 0, "phase": "évaluation"})", "r", 1).phase, "évaluation");
  EXPECT_EQ(error_of(R"({"step": 0, "rank": -1})"),
            "rank0.jsonl:1: field \"rank\" must be a non-negative integer, found -1");
  // -2^63 is how an optional integer says absent (packed_optional.h): out of range, as 2^63 is.
  EXPECT_EQ(error_of(R"({"step": 0, "seq_len": -9223372036854775808})"),
            "rank0.jsonl:1: field \"seq_len\" is out of range");
  EXPECT_EQ(error_of(R"({"step": 0, "tokens": 9223372036854775808})"),
            "rank0.jsonl:1: field \"tokens\" is out of range");
  EXPECT_EQ(parse_step_record(R"({"step": -9223372036854775808, "num_ooms": -9223372036854775808})", "r", 1).step,
            std::numeric_limits<std::int64_t>::lowest());
  EXPECT_EQ(error_of(R"({"step": 0, "num_ooms": 0.5})"),
            "rank0.jsonl:1: field \"num_ooms\" must be an integer, found 0.5");
  EXPECT_EQ(error_of(R"({"step": 0, "data_wait_ms": -4})"),
            "rank0.jsonl:1: data_wait_ms and compute_ms must not be negative");
  EXPECT_EQ(error_of(R"({"step": 0, "optimizer_step": "yes"})"),
            "rank0.jsonl:1: field \"optimizer_step\" must be true or false, found \"yes\"");
  const std::string nan_line = R"({"step": 0, "samples_per_s": NaN})";
  const auto message = error_of(nan_line);
  EXPECT_TRUE(message.starts_with("rank0.jsonl:1: invalid JSON")) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
  EXPECT_THROW(read_telemetry_file(kFixtures / "calib" / "missing.jsonl"), InputError);
  EXPECT_THROW(read_telemetry_file(kFixtures), InputError);
}

// Issue 16: a crash cuts the last line of steps.jsonl; what precedes it is the telemetry.
TEST(TelemetryReader, ALastLineCutByACrashIsLeftOutAndNoted) {
  const std::string good = R"({"step": 0, "data_wait_ms": 1, "compute_ms": 2})"
                           "\n"
                           R"({"step": 1, "data_wait_ms": 1, "compute_ms": 2})";
  for (const std::string cut :
       {R"({"step": 2, "data_wait_ms": 1.)", R"({"step": 2, "phase": "tra)", R"({"step": 2,)", "{"}) {
    std::istringstream in(good + "\n" + cut);
    TelemetryNotes notes;
    const auto records = read_telemetry(in, "rank0.jsonl", &notes);
    EXPECT_EQ(records.size(), 2u) << cut;
    EXPECT_EQ(notes.cut_last_line, 3u) << cut;
  }
  // Whole but wrong, or cut before its end: an error as anywhere else.
  EXPECT_EQ(error_of(good + "\n" + R"({"step": "2"})"),
            "rank0.jsonl:3: field \"step\" must be an integer, found \"2\"");
  EXPECT_TRUE(error_of(good + "\n" + R"({"step": 2} x)").starts_with("rank0.jsonl:3: invalid JSON"));
  EXPECT_TRUE(error_of(R"({"step": 2,)" "\n" + good).starts_with("rank0.jsonl:1: invalid JSON"));  // not the last line
  EXPECT_EQ(error_of(R"({"step": 2,)"), "rank0.jsonl: no telemetry records");
  // The file reader streams the same way.
  const fs::path path = fs::path(::testing::TempDir()) / "telemetry_cut.jsonl";
  std::ofstream(path) << good << "\n" << R"({"step": 2, "data_wait_ms": 3)";
  TelemetryNotes notes;
  EXPECT_EQ(read_telemetry_file(path, &notes).size(), 2u);
  EXPECT_EQ(notes.cut_last_line, 3u);
}

// Issue 16: `check /dev/zero` reached 4.5 GB; a line without end grew without bound.
TEST(TelemetryReader, SpecialFilesAndEndlessLinesGetOneLine) {
  try {
    read_telemetry_file("/dev/zero");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "/dev/zero: cannot read: is a character device, not a file");
  }
  const fs::path path = fs::path(::testing::TempDir()) / "telemetry_long_line.jsonl";
  std::ofstream(path) << R"({"step": 0})" << "\n" << std::string(kMaxTelemetryLineBytes + 1, ' ');
  try {
    read_telemetry_file(path);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), path.string() + ":2: line longer than 16777216 bytes");
  }
}

// A long job's file is read in less memory than its bytes: the hook's lines (ten memory_stats values, 530
// bytes) make records of 352 bytes, the names shared by all of them.
TEST(TelemetryReader, TheHooksRecordsHoldLessThanTheirLines) {
  std::ifstream in(kFixtures / "big" / "steps.jsonl");
  std::string line;
  std::getline(in, line);
  std::string text;
  for (int i = 0; i < 20000; ++i) text += line + "\n";
  std::istringstream lines(text);
  const auto records = read_telemetry(lines, "steps.jsonl");
  ASSERT_EQ(records.size(), 20000u);
  const auto name = [](const StepRecord& r) { return r.memory_stats.begin()->name.identity(); };
  EXPECT_EQ(name(records.front()), name(records.back()));
  EXPECT_LT(telemetry_footprint(records), 0.7 * static_cast<double>(text.size()));
}

// A record costs sizeof(StepRecord) however short its line: 1 GiB of `{"step":0}` lines would hold 18 GB
// (5 million of them, 84 MB, held 4.8 GB before records were compacted). The records may hold
// kTelemetryMemoryPerByte bytes per byte read, plus kTelemetryMemoryFloor; past that, one line.
TEST(TelemetryReader, LinesTooShortForTheirRecordsAreRefusedPastTheBudget) {
  const std::string tiny = "{\"step\":0}\n";
  // Each line adds sizeof(StepRecord) to what the records hold and 4 x 11 bytes to what they may hold.
  const std::size_t last_allowed = kTelemetryMemoryFloor / (sizeof(StepRecord) - kTelemetryMemoryPerByte * tiny.size());
  std::string text;
  text.reserve((last_allowed + 100) * tiny.size());
  for (std::size_t i = 0; i < last_allowed - 100; ++i) text += tiny;
  std::istringstream allowed(text);
  const auto records = read_telemetry(allowed, "rank0.jsonl");
  EXPECT_EQ(telemetry_footprint(records), records.size() * sizeof(StepRecord));
  EXPECT_LE(telemetry_footprint(records), kTelemetryMemoryFloor + kTelemetryMemoryPerByte * text.size());

  for (int i = 0; i < 200; ++i) text += tiny;
  const std::string message = error_of(text);
  const std::string prefix = "rank0.jsonl:";
  ASSERT_TRUE(message.starts_with(prefix)) << message;
  const std::size_t refused_at = std::stoul(message.substr(prefix.size()));
  EXPECT_GE(refused_at, last_allowed - 1);
  EXPECT_LE(refused_at, last_allowed + 1);
  EXPECT_NE(message.find("of lines, more than 4 times that plus 64.00 MiB: lines too short for step telemetry "
                         "(a record takes 192 bytes however short its line)"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
}
