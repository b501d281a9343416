#include "agent/rank_file_writer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include <gtest/gtest.h>

#include "agent/rank_file_layout.h"
#include "agent/rank_file_reader.h"
#include "test_support.h"
#include "util/error.h"

namespace fragscope::agent {
namespace {

using testing::run_python;
using testing::TempDir;

// Every field set, values as in rank_file_reader_test (calib's first step, an H200).
RankRecord full_record() {
  RankRecord r;
  r.pid = 4242;
  r.rank = 5;
  r.local_rank = 1;
  r.world_size = 8;
  r.gpu = 3;
  r.phase = JobPhase::kEval;
  r.largest_free_known = true;
  r.update_unix_ns = 1'700'000'000'000'000'002;
  r.step_unix_ns = 1'700'000'000'000'000'001;
  r.step = 77;
  r.allocated_bytes = 7'692'978'688;
  r.reserved_bytes = 32'872'857'600;
  r.active_bytes = 7'692'978'689;
  r.inactive_split_bytes = 2'396'419'584;
  r.requested_bytes = 7'692'977'412;
  r.largest_free_block_bytes = 1'073'741'824;
  r.allocated_peak_bytes = 30'983'239'168;
  r.reserved_peak_bytes = 32'872'857'601;
  r.device_total_bytes = 150'754'820'096;
  r.alloc_retries = 3;
  r.ooms = 1;
  r.segments = 516;
  r.checkpoint_ack = 2;
  r.batch_samples = 4;
  r.batch_tokens = 10'336;
  r.batch_longest_sequence = 2584;
  r.loader_queue_depth = 7;
  r.step_seconds = 0.5;
  r.data_wait_seconds = 0.125;
  r.h2d_seconds = 0.001;
  r.compute_seconds = 0.375;
  r.data_wait_ratio = 0.25;
  r.samples_per_second = 8.0;
  r.step_seconds_total = 38.5;
  r.data_wait_seconds_total = 9.625;
  r.hook_seconds_total = 0.0125;
  r.job = "llama-sft";
  r.gpu_uuid = "GPU-0b3c6f5e-1a2b-3c4d-5e6f-000000000001";
  return r;
}

std::vector<char> bytes_of(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(RankFileWriterTest, PayloadIsByteForByteTheHookWriters) {
  TempDir dir;
  RankRecord r = full_record();
  // The 64-byte cut falls inside the two-byte "é" (bytes 63-64): it is dropped whole, as shm.py does.
  r.job = std::string(63, 'j') + "\xc3\xa9" + "tail";
  const auto payload = encode_rank_payload(r);
  {
    std::ofstream out(dir.path() / "cpp.bin", std::ios::binary);
    out.write(reinterpret_cast<const char*>(payload.data()), static_cast<std::streamsize>(payload.size()));
  }
  const std::string code =
      "rec = shm.RankRecord(pid=4242, rank=5, local_rank=1, world_size=8, gpu=3, phase='eval', "
      "largest_free_known=True, update_unix_ns=1_700_000_000_000_000_002, step_unix_ns=1_700_000_000_000_000_001, "
      "step=77, allocated_bytes=7_692_978_688, reserved_bytes=32_872_857_600, active_bytes=7_692_978_689, "
      "inactive_split_bytes=2_396_419_584, requested_bytes=7_692_977_412, largest_free_block_bytes=1_073_741_824, "
      "allocated_peak_bytes=30_983_239_168, reserved_peak_bytes=32_872_857_601, device_total_bytes=150_754_820_096, "
      "alloc_retries=3, ooms=1, segments=516, checkpoint_ack=2, batch_samples=4, batch_tokens=10_336, "
      "batch_longest_sequence=2584, loader_queue_depth=7, step_seconds=0.5, data_wait_seconds=0.125, "
      "h2d_seconds=0.001, compute_seconds=0.375, data_wait_ratio=0.25, samples_per_second=8.0, "
      "step_seconds_total=38.5, data_wait_seconds_total=9.625, hook_seconds_total=0.0125, "
      "job='j' * 63 + '\\u00e9tail', gpu_uuid='GPU-0b3c6f5e-1a2b-3c4d-5e6f-000000000001')\n"
      "open('" + (dir.path() / "py.bin").string() + "', 'wb').write(rec.pack())\n";
  ASSERT_EQ(run_python(dir, code), 0);
  EXPECT_EQ(bytes_of(dir.path() / "cpp.bin"), bytes_of(dir.path() / "py.bin"));
}

TEST(RankFileWriterTest, PhaseCodesAreTheHooksAndAnyOtherReadsAsUnknown) {
  // The hook's table (shm.PHASES) names each code the layout maps to a phase; a phase the file
  // has no code for is written as kUnknownPhaseCode and read back as unknown.
  TempDir dir;
  std::string expected = "{";
  for (std::size_t code = 0; code < std::size(layout::kPhaseByCode); ++code)
    expected += (code ? ", '" : "'") + std::string(phase_name(layout::kPhaseByCode[code])) + "': " +
                std::to_string(code);
  ASSERT_EQ(run_python(dir, "assert shm.PHASES == " + expected + "}, shm.PHASES"), 0) << expected;
  for (const JobPhase phase : {JobPhase::kTrain, JobPhase::kEval, JobPhase::kCheckpoint, JobPhase::kOptimizer}) {
    RankRecord r = full_record();
    r.phase = phase;
    const auto payload = encode_rank_payload(r);
    std::uint32_t code = 0;
    std::memcpy(&code, payload.data() + layout::kPhase - layout::kHeaderSize, sizeof code);  // little-endian host
    RankFileWriter writer(dir.path() / "rank5-pid4242.fsr", r);
    const auto reading = read_rank_file(writer.path());
    ASSERT_EQ(reading.state, RankFileState::kOk) << reading.problem;
    if (phase == JobPhase::kOptimizer) {
      EXPECT_EQ(code, layout::kUnknownPhaseCode);
      EXPECT_EQ(reading.record.phase, JobPhase::kUnknown);
    } else {
      ASSERT_LT(code, std::size(layout::kPhaseByCode));
      EXPECT_EQ(layout::kPhaseByCode[code], phase);
      EXPECT_EQ(reading.record.phase, phase);
    }
  }
}

TEST(RankFileWriterTest, ReaderGetsBackEveryFieldIncludingTheThroughputTotals) {
  TempDir dir;
  RankRecord r = full_record();
  r.job = "llama-sft";
  r.throughput_totals_known = true;
  r.samples_total = 308;
  r.tokens_total = 795'872;
  {
    RankFileWriter writer(dir.path() / "rank5-pid4242.fsr", r);
    r.step = 78;
    writer.publish(r);
    const auto reading = read_rank_file(writer.path());
    ASSERT_EQ(reading.state, RankFileState::kOk) << reading.problem;
    const RankRecord& back = reading.record;
    EXPECT_EQ(back.step, 78u);
    EXPECT_TRUE(back.throughput_totals_known);
    EXPECT_EQ(back.samples_total, 308u);
    EXPECT_EQ(back.tokens_total, 795'872u);
    EXPECT_EQ(back.phase, JobPhase::kEval);
    EXPECT_EQ(back.job, "llama-sft");
    EXPECT_EQ(back.loader_queue_depth, 7);
    EXPECT_DOUBLE_EQ(back.hook_seconds_total, 0.0125);
    const auto bytes = bytes_of(writer.path());
    ASSERT_EQ(bytes.size(), 512u);
    EXPECT_EQ(bytes[16], 4);  // seq: two publishes, two increments each
    EXPECT_FALSE(std::filesystem::exists(writer.path().string() + ".tmp"));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));  // the destructor removed the file
}

TEST(RankFileWriterTest, TotalsWithoutTheirFlagAreNotRead) {
  // A writer that predates the totals leaves flag and bytes zero; a reader must not report 0 samples.
  TempDir dir;
  RankRecord r = full_record();
  r.job = "old-hook";
  RankFileWriter writer(dir.path() / "rank5-pid4242.fsr", r);
  const auto bytes = bytes_of(writer.path());
  EXPECT_TRUE(std::all_of(bytes.begin() + 424, bytes.end(), [](char c) { return c == 0; }));
  EXPECT_FALSE(read_rank_file(writer.path()).record.throughput_totals_known);
}

TEST(RankFileWriterTest, UnwritableDirectoryIsAOneLineError) {
  TempDir dir;
  const auto missing = dir.path() / "absent" / "rank0-pid1.fsr";
  try {
    RankFileWriter writer(missing, full_record());
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), missing.string() + ".tmp: cannot create the rank file: No such file or directory");
  }
}

}  // namespace
}  // namespace fragscope::agent
