#include "agent/rank_simulator.h"

#include <sys/stat.h>

#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "agent/rank_file_reader.h"
#include "test_support.h"
#include "util/error.h"

namespace fragscope::agent {
namespace {

using testing::TempDir;

const std::filesystem::path kFixtures = FRAGSCOPE_FIXTURES_DIR;

std::string error_of(const std::filesystem::path& path) {
  try {
    load_recorded_run(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

RankRecord wait_for_record(const std::filesystem::path& path, bool (*done)(const RankRecord&)) {
  RankFileReading reading;
  for (int i = 0; i < 400; ++i) {
    reading = read_rank_file(path);
    if (reading.state == RankFileState::kOk && done(reading.record)) return reading.record;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ADD_FAILURE() << "timed out waiting on " << path << ": " << reading.problem;
  return reading.record;
}

TEST(RecordedRunTest, ReadsTheRecordedStepsAndTheCardSize) {
  const RecordedRun run = load_recorded_run(kFixtures / "calib");
  EXPECT_EQ(run.name, "calib");
  ASSERT_EQ(run.steps.size(), 32u);
  EXPECT_EQ(run.device_total_bytes, 150'754'820'096u);  // smi.csv: 143771 MiB
  const RecordedStep& first = run.steps[0];  // calib/steps.jsonl line 1
  EXPECT_DOUBLE_EQ(first.end_seconds, 2.9384608268737793);
  EXPECT_DOUBLE_EQ(first.data_wait_seconds, 0.008466620000000091);
  EXPECT_DOUBLE_EQ(first.compute_seconds, 2.9295102100000036);
  EXPECT_EQ(first.samples, 4u);
  EXPECT_EQ(first.longest_sequence, 2584u);
  EXPECT_EQ(first.tokens, 4u * 2584u);
  EXPECT_EQ(first.reserved_bytes, 32'872'857'600u);
  EXPECT_EQ(first.inactive_split_bytes, 2'396'419'584u);
  EXPECT_EQ(first.segments, 516u);
  EXPECT_EQ(first.phase, Phase::kTrain);
  EXPECT_EQ(load_recorded_run(kFixtures / "input_bound" / "steps.jsonl").name, "input_bound");
}

TEST(RecordedRunTest, BadInputIsOneLineNamingTheFileAndLine) {
  TempDir dir;
  const auto file = dir.path() / "steps.jsonl";
  auto write = [&](const std::string& text) { std::ofstream(file, std::ios::trunc) << text; };
  EXPECT_EQ(error_of(dir.path() / "absent"),
            (dir.path() / "absent").string() + ": cannot read the recorded steps: No such file or directory");
  write("");
  EXPECT_EQ(error_of(dir.path()), file.string() + ": no steps");
  write("{\"t\": 1, \"data_wait_ms\": 1, \"compute_ms\": 2}\n{\"t\": 2, \"data_wait_ms\": 1\n");
  EXPECT_EQ(error_of(file), file.string() + ":2: not a JSON object");
  write("{\"t\": 1, \"data_wait_ms\": 1}\n");
  EXPECT_EQ(error_of(file), file.string() + ":1: missing \"compute_ms\"");
  write("{\"t\": 1, \"data_wait_ms\": -1, \"compute_ms\": 2}\n");
  EXPECT_EQ(error_of(file), file.string() + ":1: \"data_wait_ms\" must be a number >= 0");
  write("{\"t\": 2, \"data_wait_ms\": 1, \"compute_ms\": 2}\n{\"t\": 1, \"data_wait_ms\": 1, \"compute_ms\": 2}\n");
  EXPECT_EQ(error_of(file), file.string() + ":2: \"t\" goes backwards (1 after 2)");
  write("{\"t\": 1, \"data_wait_ms\": 1, \"compute_ms\": 2, \"phase\": \"nap\"}\n");
  EXPECT_EQ(error_of(file), file.string() + ":1: \"phase\" must be \"train\", \"eval\" or \"checkpoint\"");
  write("{\"t\": 1, \"data_wait_ms\": 1, \"compute_ms\": 2}\n");
  std::ofstream(dir.path() / "smi.csv") << "timestamp, memory.used [MiB]\n2026, 3 MiB\n";
  EXPECT_EQ(error_of(dir.path()), (dir.path() / "smi.csv").string() + ": no memory.total [MiB] column");
  const auto fifo = dir.path() / "fifo.jsonl";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of(fifo), fifo.string() + ": not a regular file");  // and does not block
}

TEST(RankSimulatorTest, PublishesTheRecordedStepsAtPaceAndLoops) {
  TempDir dir;
  // calib's 32 steps take 11.7 s; at 50x a pass takes 0.23 s.
  RankSimulator simulator({load_recorded_run(kFixtures / "calib")}, dir.path(), 50.0);
  ASSERT_EQ(simulator.rank_files().size(), 1u);
  const auto path = simulator.rank_files()[0];
  EXPECT_EQ(path.filename(), fmt::format("rank0-pid{}.fsr", ::getpid()));  // a name the agent reads
  const RankRecord r = wait_for_record(path, [](const RankRecord& r) { return r.step > 32; });  // second pass
  EXPECT_EQ(r.job, "calib");
  EXPECT_EQ(r.gpu, 0);
  EXPECT_EQ(r.pid, ::getpid());
  EXPECT_EQ(r.device_total_bytes, 150'754'820'096u);
  EXPECT_TRUE(r.throughput_totals_known);
  EXPECT_EQ(r.samples_total, 4 * r.step);  // every calib step has mbs 4
  EXPECT_GT(r.tokens_total, r.samples_total * 1000);
  EXPECT_GT(r.reserved_bytes, 30'000'000'000u);
  EXPECT_GT(r.data_wait_ratio, 0.0);
  EXPECT_LT(r.data_wait_ratio, 0.01);  // truth.json: calib waits 0.1% of the time
  EXPECT_GT(r.step_seconds_total, 11.0);
}

TEST(RankSimulatorTest, AcknowledgesCheckpointRequestsAndRemovesItsFiles) {
  TempDir dir;
  std::filesystem::path path;
  {
    RankSimulator simulator({load_recorded_run(kFixtures / "input_fixed")}, dir.path(), 20.0);
    path = simulator.rank_files()[0];
    std::ofstream(path.string() + ".checkpoint") << "3\n";  // what the agent writes
    const RankRecord r = wait_for_record(path, [](const RankRecord& r) { return r.checkpoint_ack == 3; });
    EXPECT_EQ(r.checkpoint_ack, 3u);
    std::filesystem::remove(path.string() + ".checkpoint");
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(RankSimulatorTest, RunsWithTheSameNameAreRefused) {
  TempDir dir;
  auto calib = load_recorded_run(kFixtures / "calib");
  try {
    RankSimulator simulator({calib, calib}, dir.path(), 1.0);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "--simulate: two recorded runs are named 'calib'; training jobs must differ");
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace fragscope::agent
