#include "agent/rank_file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "agent/rank_file_layout.h"
#include "agent/rank_file_writer.h"
#include "test_support.h"

namespace fragscope::agent {
namespace {

using testing::make_flooded_folder;
using testing::run_python;
using testing::TempDir;

// Writes one record with every field set, through the hook's real writer.
constexpr const char* kFullRecord = R"(
rec = shm.RankRecord(
    pid=4242, rank=5, local_rank=1, world_size=8, gpu=3, phase="checkpoint", largest_free_known=True,
    update_unix_ns=time.time_ns(), step_unix_ns=1_700_000_000_000_000_001, step=77,
    allocated_bytes=7_692_978_688, reserved_bytes=32_872_857_600, active_bytes=7_692_978_689,
    inactive_split_bytes=2_396_419_584, requested_bytes=7_692_977_412, largest_free_block_bytes=1_073_741_824,
    allocated_peak_bytes=30_983_239_168, reserved_peak_bytes=32_872_857_601, device_total_bytes=150_754_820_096,
    alloc_retries=3, ooms=1, segments=516, checkpoint_ack=2, batch_samples=4, batch_tokens=10_336,
    batch_longest_sequence=2584, loader_queue_depth=7, step_seconds=0.5, data_wait_seconds=0.125,
    h2d_seconds=0.001, compute_seconds=0.375, data_wait_ratio=0.25, samples_per_second=8.0,
    step_seconds_total=38.5, data_wait_seconds_total=9.625, hook_seconds_total=0.0125,
    job="llama-sft", gpu_uuid="GPU-0b3c6f5e-1a2b-3c4d-5e6f-000000000001")
w = shm.RankFileWriter(DIR, rec)
)";

class RankFileReaderTest : public ::testing::Test {
 protected:
  std::filesystem::path write_full_record() {
    EXPECT_EQ(run_python(dir_, "DIR = '" + dir_.path().string() + "'\n" + kFullRecord), 0);
    return dir_.path() / "rank5-pid4242.fsr";
  }

  std::vector<char> bytes_of(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }

  void overwrite(const std::filesystem::path& path, const std::vector<char>& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  TempDir dir_;
};

TEST_F(RankFileReaderTest, ReadsEveryFieldThePythonWriterWrote) {
  const auto reading = read_rank_file(write_full_record());
  ASSERT_EQ(reading.state, RankFileState::kOk) << reading.problem;
  const RankRecord& r = reading.record;
  EXPECT_EQ(r.pid, 4242);
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.world_size, 8);
  EXPECT_EQ(r.gpu, 3);
  EXPECT_EQ(r.phase, JobPhase::kCheckpoint);
  EXPECT_TRUE(r.largest_free_known);
  EXPECT_EQ(r.step_unix_ns, 1'700'000'000'000'000'001u);
  EXPECT_EQ(r.step, 77u);
  EXPECT_EQ(r.allocated_bytes, 7'692'978'688u);
  EXPECT_EQ(r.reserved_bytes, 32'872'857'600u);
  EXPECT_EQ(r.active_bytes, 7'692'978'689u);
  EXPECT_EQ(r.inactive_split_bytes, 2'396'419'584u);
  EXPECT_EQ(r.requested_bytes, 7'692'977'412u);
  EXPECT_EQ(r.largest_free_block_bytes, 1'073'741'824u);
  EXPECT_EQ(r.allocated_peak_bytes, 30'983'239'168u);
  EXPECT_EQ(r.reserved_peak_bytes, 32'872'857'601u);
  EXPECT_EQ(r.device_total_bytes, 150'754'820'096u);
  EXPECT_EQ(r.alloc_retries, 3u);
  EXPECT_EQ(r.ooms, 1u);
  EXPECT_EQ(r.segments, 516u);
  EXPECT_EQ(r.checkpoint_ack, 2u);
  EXPECT_EQ(r.batch_samples, 4u);
  EXPECT_EQ(r.batch_tokens, 10'336u);
  EXPECT_EQ(r.batch_longest_sequence, 2584u);
  EXPECT_EQ(r.loader_queue_depth, 7);
  EXPECT_DOUBLE_EQ(r.step_seconds, 0.5);
  EXPECT_DOUBLE_EQ(r.data_wait_seconds, 0.125);
  EXPECT_DOUBLE_EQ(r.h2d_seconds, 0.001);
  EXPECT_DOUBLE_EQ(r.compute_seconds, 0.375);
  EXPECT_DOUBLE_EQ(r.data_wait_ratio, 0.25);
  EXPECT_DOUBLE_EQ(r.samples_per_second, 8.0);
  EXPECT_DOUBLE_EQ(r.step_seconds_total, 38.5);
  EXPECT_DOUBLE_EQ(r.data_wait_seconds_total, 9.625);
  EXPECT_DOUBLE_EQ(r.hook_seconds_total, 0.0125);
  EXPECT_EQ(r.job, "llama-sft");
  EXPECT_EQ(r.gpu_uuid, "GPU-0b3c6f5e-1a2b-3c4d-5e6f-000000000001");
  // 2'396'419'584 / 32'872'857'600: calib's first step (fixtures/calib/steps.jsonl).
  EXPECT_NEAR(r.fragmentation_ratio(), 0.0729, 1e-4);
}

TEST_F(RankFileReaderTest, WriterKilledMidUpdateIsTornNotUsed) {
  // The real writer enters its update (seq odd), then the process dies before finishing.
  const std::string code = "DIR = '" + dir_.path().string() + "'\n" + kFullRecord +
                           "u = w._updating(); u.__enter__()\nw._map[100:108] = b'\\xff' * 8\n"
                           "os.kill(os.getpid(), 9)\n";
  EXPECT_EQ(run_python(dir_, code), 128 + 9);
  const auto reading = read_rank_file(dir_.path() / "rank5-pid4242.fsr");
  EXPECT_EQ(reading.state, RankFileState::kTorn);
  EXPECT_NE(reading.problem.find("odd"), std::string::npos) << reading.problem;
}

TEST_F(RankFileReaderTest, GarbageIsInvalid) {
  const auto path = dir_.path() / "rank0-pid1.fsr";
  std::vector<char> garbage(512);
  for (std::size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>(i * 37 + 11);
  overwrite(path, garbage);
  const auto reading = read_rank_file(path);
  EXPECT_EQ(reading.state, RankFileState::kInvalid);
  EXPECT_EQ(reading.problem, "not a rank file (bad magic)");
}

TEST_F(RankFileReaderTest, TruncatedFilesAreInvalid) {
  const auto path = write_full_record();
  const auto full = bytes_of(path);
  for (std::size_t keep : {std::size_t{0}, std::size_t{20}, std::size_t{200}, std::size_t{511}}) {
    overwrite(path, std::vector<char>(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(keep)));
    const auto reading = read_rank_file(path);
    EXPECT_EQ(reading.state, RankFileState::kInvalid) << keep;
    EXPECT_NE(reading.problem.find("truncated"), std::string::npos) << reading.problem;
  }
}

TEST_F(RankFileReaderTest, FlippedPayloadByteFailsTheChecksum) {
  const auto path = write_full_record();
  auto bytes = bytes_of(path);
  bytes[100] ^= 0x01;
  overwrite(path, bytes);
  const auto reading = read_rank_file(path);
  EXPECT_EQ(reading.state, RankFileState::kInvalid);
  EXPECT_EQ(reading.problem, "checksum mismatch");
}

TEST_F(RankFileReaderTest, NewerLayoutVersionIsUnsupportedNotGuessed) {
  // A future writer: same magic, version 2, a bigger record.
  const std::string code = "DIR = '" + dir_.path().string() + "'\nshm.VERSION = 2\nshm.SIZE = 1024\n" + kFullRecord;
  ASSERT_EQ(run_python(dir_, code), 0);
  const auto reading = read_rank_file(dir_.path() / "rank5-pid4242.fsr");
  EXPECT_EQ(reading.state, RankFileState::kUnsupported);
  EXPECT_EQ(reading.problem, "layout version 2 is newer than this agent reads (1)");
}

TEST_F(RankFileReaderTest, FifoIsRefusedWithoutBlocking) {
  const auto path = dir_.path() / "rank0-pid1.fsr";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  const auto reading = read_rank_file(path);
  EXPECT_EQ(reading.state, RankFileState::kInvalid);
  EXPECT_EQ(reading.problem, "not a regular file");
}

// Only a rank file's name with the request's suffix is a checkpoint request: any other name ending so (a name is any
// bytes; one that is not UTF-8 once ended the agent when its removal was logged) is not the agent's to remove.
TEST_F(RankFileReaderTest, ACheckpointRequestIsARankFilesNameWithTheSuffix) {
  for (const char* name : {"\xff.fsr.checkpoint", "notes.fsr.checkpoint", "rank1.fsr.checkpoint.tmp",
                           "rank2-pid7.fsr.checkpoint.tmp", "rank2-pid7.fsr.checkpoint"})
    std::ofstream(dir_.path() / name) << "1\n";
  const auto scan = scan_rank_directory(dir_.path(), testing::unix_ns_now(), std::chrono::seconds(60));
  auto found = scan.checkpoint_files;
  std::sort(found.begin(), found.end());
  EXPECT_EQ(found, (std::vector<std::string>{"rank2-pid7.fsr.checkpoint", "rank2-pid7.fsr.checkpoint.tmp"}));
}

TEST_F(RankFileReaderTest, ScanReadsOnlyRankFilesAndMarksStaleOnes) {
  write_full_record();
  std::ofstream(dir_.path() / "notes.txt") << "not a rank file";
  std::ofstream(dir_.path() / "rank9-pid9.fsr.checkpoint") << "1\n";
  std::ofstream(dir_.path() / "rank9-pid9.fsr") << "junk";
  const auto now = testing::unix_ns_now();
  auto scan = scan_rank_directory(dir_.path(), now, std::chrono::seconds(60));
  ASSERT_EQ(scan.readings.size(), 2u);
  EXPECT_EQ(scan.readings[0].name, "rank5-pid4242.fsr");
  EXPECT_EQ(scan.readings[0].path, dir_.path() / "rank5-pid4242.fsr");
  EXPECT_EQ(scan.readings[0].state, RankFileState::kOk);
  EXPECT_EQ(scan.readings[1].state, RankFileState::kInvalid);
  EXPECT_EQ(scan.checkpoint_files, std::vector<std::string>{"rank9-pid9.fsr.checkpoint"});
  EXPECT_EQ(scan.problem, "");
  EXPECT_TRUE(scan.warnings.empty());
  // Two minutes later, without an update, the rank is stale.
  scan = scan_rank_directory(dir_.path(), now + 120'000'000'000ull, std::chrono::seconds(60));
  EXPECT_EQ(scan.readings[0].state, RankFileState::kStale);
  EXPECT_EQ(scan.readings[0].problem, "no update for 120 s");
  EXPECT_EQ(scan.readings[0].record.rank, 5);
}

// Issue 16: a missing rank folder looked like a healthy node with no ranks.
TEST_F(RankFileReaderTest, MissingDirectoryIsAProblemNotAnEmptyNode) {
  const auto scan = scan_rank_directory(dir_.path() / "absent", testing::unix_ns_now(), std::chrono::seconds(60));
  EXPECT_TRUE(scan.readings.empty());
  EXPECT_EQ(scan.problem, "rank directory " + (dir_.path() / "absent").string() + ": No such file or directory");
}

// Writes `count` live ranks through the hook's writer into `folder`.
void write_ranks(const TempDir& dir, const std::filesystem::path& folder, int count) {
  ASSERT_EQ(
      run_python(dir, "for r in range(" + std::to_string(count) + "):\n    shm.RankFileWriter('" + folder.string() +
                          "', shm.RankRecord(pid=100 + r, rank=r, update_unix_ns=time.time_ns()))\n"),
      0);
}

std::size_t count_ok(const RankScan& scan) {
  return static_cast<std::size_t>(std::count_if(scan.readings.begin(), scan.readings.end(),
                                                [](const auto& r) { return r.state == RankFileState::kOk; }));
}

// Issue 16: 20,000 junk files hid 3 of 5 ranks (the cap took the first 4,096 *.fsr in
// directory order).
TEST_F(RankFileReaderTest, JunkNamesNeitherCountNorHideRanks) {
  const TempDir tmpfs(testing::shared_memory_dir());
  write_ranks(tmpfs, tmpfs.path(), 5);
  for (int i = 0; i < 20000; ++i) std::ofstream(tmpfs.path() / ("junk" + std::to_string(i) + ".fsr"));
  const auto scan = scan_rank_directory(tmpfs.path(), testing::unix_ns_now(), std::chrono::seconds(60));
  EXPECT_EQ(scan.readings.size(), 5u);
  EXPECT_EQ(count_ok(scan), 5u);
  EXPECT_TRUE(scan.warnings.empty());
}

TEST_F(RankFileReaderTest, AFloodOfRankNamesIsCappedPerOwnerAndReported) {
  const TempDir tmpfs(testing::shared_memory_dir());
  write_ranks(tmpfs, tmpfs.path(), 5);
  // Another user's 5,000 files with rank names: they cannot crowd out root's ranks.
  for (int i = 0; i < 5000; ++i) {
    const auto path = tmpfs.path() / ("rank" + std::to_string(i) + "-pid9" + std::to_string(i) + ".fsr");
    std::ofstream(path) << "junk";
    ASSERT_EQ(::chown(path.c_str(), 4242, 4242), 0);
  }
  const auto scan = scan_rank_directory(tmpfs.path(), testing::unix_ns_now(), std::chrono::seconds(60));
  EXPECT_EQ(count_ok(scan), 5u);
  EXPECT_EQ(scan.readings.size(), 5u + kMaxRankFiles);
  EXPECT_EQ(scan.files_unread, 5000 - kMaxRankFiles);
  // Worded without the count, so a flood that goes on is logged once.
  EXPECT_EQ(scan.warnings, std::vector<std::string>{tmpfs.path().string() +
                                                    ": uid 4242 has more than 1024 rank files here, only the newest "
                                                    "read"});
}

TEST_F(RankFileReaderTest, AnOwnersNewestFilesAreTheOnesRead) {
  const TempDir tmpfs(testing::shared_memory_dir());
  // The same owner's 5,000 old junk files and 5 ranks written after them.
  for (int i = 0; i < 5000; ++i) {
    const auto path = tmpfs.path() / ("rank" + std::to_string(i) + "-pid9" + std::to_string(i) + ".fsr");
    std::ofstream(path) << "junk";
    const timespec an_hour_ago[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), an_hour_ago, 0), 0);
  }
  write_ranks(tmpfs, tmpfs.path(), 5);
  const auto scan = scan_rank_directory(tmpfs.path(), testing::unix_ns_now(), std::chrono::seconds(60));
  EXPECT_EQ(count_ok(scan), 5u);
  EXPECT_EQ(scan.readings.size(), kMaxRankFiles);
}

// The hook's private folders: <root>/<uid>/, trusted only where the uid owns folder and file.
TEST_F(RankFileReaderTest, PerUserFoldersAreReadWhereTheirOwnerMatches) {
  const auto root = dir_.path();
  const auto mine = root / "1000";
  std::filesystem::create_directory(mine);
  write_ranks(dir_, mine, 2);
  for (const auto& entry : std::filesystem::directory_iterator(mine))
    ASSERT_EQ(::chown(entry.path().c_str(), 1000, 1000), 0);
  ASSERT_EQ(::chown(mine.c_str(), 1000, 1000), 0);
  ::chmod(mine.c_str(), 0700);
  // In that folder: a file of another user, a FIFO and a link, all with rank names.
  std::filesystem::copy_file(mine / "rank0-pid100.fsr", mine / "rank7-pid107.fsr");
  ASSERT_EQ(::chown((mine / "rank7-pid107.fsr").c_str(), 1001, 1001), 0);
  ASSERT_EQ(::mkfifo((mine / "rank8-pid108.fsr").c_str(), 0600), 0);
  std::filesystem::create_symlink(mine / "rank0-pid100.fsr", mine / "rank9-pid109.fsr");
  // Folders that must not be read: one named for uid 1001 but owned by 1000, and a link.
  std::filesystem::create_directory(root / "1001");
  write_ranks(dir_, root / "1001", 1);
  ASSERT_EQ(::chown((root / "1001").c_str(), 1000, 1000), 0);
  std::filesystem::create_directory_symlink(mine, root / "1002");

  const auto scan = scan_rank_directory(root, testing::unix_ns_now(), std::chrono::seconds(60));
  std::vector<std::string> names;
  for (const auto& reading : scan.readings) names.push_back(reading.name + " " + state_name(reading.state));
  EXPECT_EQ(names, (std::vector<std::string>{"1000/rank0-pid100.fsr ok", "1000/rank1-pid101.fsr ok",
                                             "1000/rank7-pid107.fsr invalid", "1000/rank8-pid108.fsr invalid",
                                             "1000/rank9-pid109.fsr invalid"}));
  EXPECT_EQ(scan.readings[0].owner_uid, 1000u);
  EXPECT_EQ(scan.readings[0].path, mine / "rank0-pid100.fsr");
  EXPECT_EQ(scan.readings[2].problem, "owned by uid 1001, not by the folder's owner 1000");
  EXPECT_EQ(scan.readings[3].problem, "not a regular file");
  EXPECT_EQ(scan.readings[4].problem, "not a regular file");
  ASSERT_EQ(scan.warnings.size(), 1u);
  EXPECT_EQ(scan.warnings[0],
            root.string() + ": 2 per-user folder names skipped, not a folder of that uid (first by name: 1001)");
}

// Audit: an update time of 2^62 never went stale, and (newest winning) shadowed the real rank.
TEST_F(RankFileReaderTest, AnUpdateTimeInTheFutureIsInvalid) {
  const auto now = testing::unix_ns_now();
  ASSERT_EQ(run_python(dir_, "D = '" + dir_.path().string() + "'\n" +
                                 "shm.RankFileWriter(D, shm.RankRecord(pid=1, rank=1, update_unix_ns=2**62))\n" +
                                 "shm.RankFileWriter(D, shm.RankRecord(pid=2, rank=2, update_unix_ns=" +
                                 std::to_string(now + 3'600'000'000'000ull) + "))\n" +
                                 "shm.RankFileWriter(D, shm.RankRecord(pid=3, rank=3, update_unix_ns=" +
                                 std::to_string(now + 2'000'000'000ull) + "))\n"),
            0);
  const auto scan = scan_rank_directory(dir_.path(), now, std::chrono::seconds(60));
  ASSERT_EQ(scan.readings.size(), 3u);
  EXPECT_EQ(scan.readings[0].state, RankFileState::kInvalid);
  EXPECT_EQ(scan.readings[1].state, RankFileState::kInvalid);
  EXPECT_EQ(scan.readings[1].problem, "update time 3600 s ahead of the clock");
  EXPECT_EQ(scan.readings[2].state, RankFileState::kOk) << "within kMaxUpdateAhead: written while the scan ran";
}

TEST_F(RankFileReaderTest, ARankFileInItsOwnersFolderIsMarkedSo) {
  const auto mine = dir_.path() / std::to_string(::geteuid());
  std::filesystem::create_directory(mine);
  write_ranks(dir_, mine, 1);
  write_ranks(dir_, dir_.path(), 1);
  const auto scan = scan_rank_directory(dir_.path(), testing::unix_ns_now(), std::chrono::seconds(60));
  ASSERT_EQ(scan.readings.size(), 2u);
  EXPECT_TRUE(scan.readings[0].in_user_folder) << scan.readings[0].name;
  EXPECT_FALSE(scan.readings[1].in_user_folder) << scan.readings[1].name;
}

// One scan of `directory`, and how long it took.
std::pair<RankScan, std::chrono::steady_clock::duration> timed_scan(const std::filesystem::path& directory) {
  const auto started = std::chrono::steady_clock::now();
  RankScan scan = scan_rank_directory(directory, testing::unix_ns_now(), std::chrono::seconds(60));
  return {std::move(scan), std::chrono::steady_clock::now() - started};
}

// Audit: every torn file was retried for ~300 µs; 4,096 of them made a 2.2 s poll (11 s of wall
// time under the DaemonSet's 200m CPU limit, past /healthz's tolerance).
TEST_F(RankFileReaderTest, TornFilesCostABoundedWait) {
  const TempDir tmpfs(testing::shared_memory_dir());
  ASSERT_EQ(run_python(tmpfs, "D = '" + tmpfs.path().string() + R"('
import struct
for r in range(2048):
    w = shm.RankFileWriter(D, shm.RankRecord(pid=r, rank=r, update_unix_ns=time.time_ns()))
    struct.pack_into('<Q', w._map, shm.SEQ_OFFSET, 3)  # a writer stopped mid-update, for good
    w.close(remove=False)
    os.chown(os.path.join(D, shm.rank_file_name(r, r)), 4242 + r % 2, 4242)
)"),
            0);
  const auto [scan, took] = timed_scan(tmpfs.path());
  ASSERT_EQ(scan.readings.size(), 2048u);
  EXPECT_TRUE(std::all_of(scan.readings.begin(), scan.readings.end(),
                          [](const auto& r) { return r.state == RankFileState::kTorn; }));
  EXPECT_LT(took, std::chrono::milliseconds(400));  // was ~1.2 s here; 16 retried files take ~10 ms
}

// Review: the retries were a budget per folder, so 128 per-user folders of 16 torn files each were all read again
// (a pod that may run as any uid makes as many folders). The scan's 16 retries are shared by all its folders.
TEST_F(RankFileReaderTest, TornFilesInManyFoldersShareOneBudgetOfRetries) {
  const TempDir tmpfs(testing::shared_memory_dir());
  ASSERT_EQ(run_python(tmpfs, "D = '" + tmpfs.path().string() + R"('
import struct
for u in range(5000, 5128):
    folder = os.path.join(D, str(u))
    os.mkdir(folder, 0o700)
    for r in range(16):
        w = shm.RankFileWriter(folder, shm.RankRecord(pid=r, rank=r, update_unix_ns=time.time_ns()))
        struct.pack_into('<Q', w._map, shm.SEQ_OFFSET, 3)  # a writer stopped mid-update, for good
        w.close(remove=False)
        os.chown(os.path.join(folder, shm.rank_file_name(r, r)), u, u)
    os.chown(folder, u, u)
)"),
            0);
  const auto [scan, took] = timed_scan(tmpfs.path());
  ASSERT_EQ(scan.readings.size(), 2048u);
  EXPECT_TRUE(std::all_of(scan.readings.begin(), scan.readings.end(),
                          [](const auto& r) { return r.state == RankFileState::kTorn && r.in_user_folder; }));
  EXPECT_LT(took, std::chrono::milliseconds(600));  // ~1 s here with 16 retries per folder; 0.40 s on a busy CI
}

TEST_F(RankFileReaderTest, AFolderPastItsBudgetIsListedOnAtTheNextScan) {
  const TempDir tmpfs(testing::shared_memory_dir());
  for (int i = 0; i < 300; ++i) std::ofstream(tmpfs.path() / ("junk" + std::to_string(i)));
  for (int i = 0; i < 20; ++i) std::ofstream(tmpfs.path() / ("rank" + std::to_string(i) + "-pid1.fsr")) << "junk";
  RankDirectoryScanner scanner(tmpfs.path(), ScanBudget{.entries = 100});
  std::set<std::string> seen;
  for (int poll = 0; poll < 4; ++poll) {
    const auto scan = scanner.scan(testing::unix_ns_now(), std::chrono::seconds(60));
    if (poll == 0) {
      EXPECT_EQ(scan.warnings, std::vector<std::string>{tmpfs.path().string() +
                                                        ": more than 100 entries, each poll examines the next 100"});
    }
    for (const auto& reading : scan.readings) seen.insert(reading.name);
  }
  EXPECT_EQ(seen.size(), 20u);  // 322 entries with "." and "..": all examined in four polls
  RankDirectoryScanner checked(tmpfs.path(), ScanBudget{.stats = 5});
  const auto scan = checked.scan(testing::unix_ns_now(), std::chrono::seconds(60));
  EXPECT_EQ(scan.readings.size(), 5u);
  EXPECT_EQ(scan.warnings, std::vector<std::string>{tmpfs.path().string() +
                                                    ": more than 5 rank files and folders to check, each poll checks "
                                                    "the next 5"});
}

// A flood of names in the shared root, however large, cannot hide a per-user folder: once found
// it is opened by name at every scan, and the listing goes on past the flood poll by poll.
TEST_F(RankFileReaderTest, AFloodedRootCannotHideAPerUserFolder) {
  const TempDir tmpfs(testing::shared_memory_dir());
  const auto mine = tmpfs.path() / std::to_string(::geteuid());
  for (int i = 0; i < 500; ++i) std::ofstream(tmpfs.path() / ("junk-before" + std::to_string(i)));
  std::filesystem::create_directory(mine);
  write_ranks(tmpfs, mine, 2);
  for (int i = 0; i < 500; ++i) std::ofstream(tmpfs.path() / ("junk-after" + std::to_string(i)));
  RankDirectoryScanner scanner(tmpfs.path(), ScanBudget{.entries = 100});
  int first_seen = -1;
  for (int poll = 0; poll < 20; ++poll) {
    const auto scan = scanner.scan(testing::unix_ns_now(), std::chrono::seconds(60));
    if (first_seen < 0 && count_ok(scan) == 2) first_seen = poll;
    if (first_seen >= 0) {
      EXPECT_EQ(count_ok(scan), 2u) << "poll " << poll;
    }
  }
  EXPECT_GE(first_seen, 0);
  EXPECT_LE(first_seen, 11);  // 1,003 entries, 100 a poll
}

// Audit: in a top level flooded past its budget, other users' rank files were read only in the
// polls whose part of the listing held them, so their series came and went between scrapes.
TEST_F(RankFileReaderTest, TopLevelRanksOfAFloodedRootAreOnEveryPollUntilRemoved) {
  const TempDir tmpfs(testing::shared_memory_dir());
  // Six ranks of two users, spread through 600 names of a flood.
  std::map<std::string, std::unique_ptr<RankFileWriter>> ranks;
  for (int r = 0; r < 6; ++r) {
    for (int i = 0; i < 100; ++i) std::ofstream(tmpfs.path() / fmt::format("junk{}-{}", r, i));
    RankRecord record;
    record.rank = r;
    record.pid = 100 + r;
    record.update_unix_ns = testing::unix_ns_now();
    const std::string name = fmt::format("rank{}-pid{}.fsr", r, 100 + r);
    ranks[name] = std::make_unique<RankFileWriter>(tmpfs.path() / name, record);
    const uid_t owner = r < 3 ? 1000 : 1001;
    ASSERT_EQ(::chown((tmpfs.path() / name).c_str(), owner, owner), 0);
  }
  RankDirectoryScanner scanner(tmpfs.path(), ScanBudget{.entries = 50});
  const auto ok_ranks = [&](const RankScan& scan) {
    std::set<std::string> names;
    for (const auto& reading : scan.readings) {
      if (reading.state == RankFileState::kOk) names.insert(reading.name);
    }
    return names;
  };
  std::set<std::string> all;
  for (const auto& [name, writer] : ranks) all.insert(name);
  // 608 entries, 50 a poll: every name is reached within 13 polls, and from then on each rank
  // is there at every poll, with its owner, whether this poll's part of the listing holds it or not.
  int polls_to_see_all = -1;
  std::set<std::string> seen;
  for (int poll = 0; poll < 30; ++poll) {
    const auto scan = scanner.scan(testing::unix_ns_now(), std::chrono::seconds(60));
    const auto present = ok_ranks(scan);
    seen.insert(present.begin(), present.end());
    if (polls_to_see_all < 0 && seen == all) polls_to_see_all = poll + 1;
    if (polls_to_see_all >= 0) {
      EXPECT_EQ(present, all) << "poll " << poll;
      for (const auto& reading : scan.readings) {
        EXPECT_EQ(reading.owner_uid, reading.record.rank < 3 ? 1000u : 1001u) << reading.name;
      }
    }
  }
  ASSERT_GE(polls_to_see_all, 1);
  EXPECT_LE(polls_to_see_all, 13);
  // A rank that exits (its file removed) is gone at the next poll, wherever its name was listed.
  ranks.erase("rank4-pid104.fsr");
  all.erase("rank4-pid104.fsr");
  // Another user who takes the free name over gets no reading of the old file's.
  std::ofstream(tmpfs.path() / "rank1-pid101.fsr.new") << "junk";
  ASSERT_EQ(::chown((tmpfs.path() / "rank1-pid101.fsr.new").c_str(), 4242, 4242), 0);
  ranks.erase("rank1-pid101.fsr");
  all.erase("rank1-pid101.fsr");
  std::filesystem::rename(tmpfs.path() / "rank1-pid101.fsr.new", tmpfs.path() / "rank1-pid101.fsr");
  for (int poll = 0; poll < 15; ++poll) {
    EXPECT_EQ(ok_ranks(scanner.scan(testing::unix_ns_now(), std::chrono::seconds(60))), all) << "poll " << poll;
  }
  // A reading kept goes once it would be stale; only files read this poll are reported stale.
  const auto scan = scanner.scan(testing::unix_ns_now() + 61'000'000'000ull, std::chrono::seconds(60));
  EXPECT_TRUE(ok_ranks(scan).empty());
  // The ranks lie 101 entries apart: a poll's 50 reach one at most.
  EXPECT_LE(std::count_if(scan.readings.begin(), scan.readings.end(),
                          [](const auto& r) { return r.state == RankFileState::kStale; }),
            1);
}

// The readings of `scan` by folder ("" for the top level) and owner.
std::map<std::pair<std::string, uid_t>, std::size_t> readings_by_folder_and_owner(const RankScan& scan) {
  std::map<std::pair<std::string, uid_t>, std::size_t> counts;
  for (const auto& reading : scan.readings) {
    const auto slash = reading.name.find('/');
    ++counts[{slash == std::string::npos ? "" : reading.name.substr(0, slash), reading.owner_uid}];
  }
  return counts;
}

std::string over_the_scans_readings(const std::filesystem::path& root) {
  return root.string() +
         ": more than 2048 rank files in all its folders, each poll reads a fair share of each folder's newest";
}

std::string over_the_listing(const std::filesystem::path& root, const ScanBudget& budget = {}) {
  return fmt::format(
      "{}: more than {} entries or {} rank files to check in its per-user folders, each poll lists a "
      "fair share of each, on from where it stopped",
      root.string(), budget.entries, budget.stats);
}

// Review: the budgets were per folder and up to 1,024 per-user folders are read, so 64 folders of 1,024 rank files
// (a pod that may run as any uid) were all read: 139 MB of agent and a 1.9 s poll. A scan's readings are shared
// between folders, so however many there are, a small folder is read whole.
TEST_F(RankFileReaderTest, ManyFloodedFoldersCannotPushASmallFoldersRanksOutOfTheScan) {
  const TempDir tmpfs(testing::shared_memory_dir());
  // Listed after the flood's folders (by name), read after them too: a budget spent first come would leave it none.
  const auto honest = tmpfs.path() / "9000";
  std::filesystem::create_directory(honest);
  write_ranks(tmpfs, honest, 2);
  for (const auto& entry : std::filesystem::directory_iterator(honest))
    ASSERT_EQ(::chown(entry.path().c_str(), 9000, 9000), 0);
  ASSERT_EQ(::chown(honest.c_str(), 9000, 9000), 0);
  for (uid_t uid = 5000; uid < 5064; ++uid) make_flooded_folder(tmpfs.path(), uid, 64);
  RankDirectoryScanner scanner(tmpfs.path());
  const auto scan = scanner.scan(testing::unix_ns_now(), std::chrono::seconds(60));
  EXPECT_EQ(count_ok(scan), 2u);
  EXPECT_EQ(scan.readings.size(), kMaxReadingsPerScan);
  EXPECT_EQ(scan.files_unread, 64 * 64 + 2 - kMaxReadingsPerScan);
  // The other 2,046 readings in equal shares: 31 or 32 of each folder's 64.
  const auto counts = readings_by_folder_and_owner(scan);
  ASSERT_EQ(counts.size(), 65u);
  for (const auto& [folder, count] : counts) {
    if (folder.second != 9000) {
      EXPECT_GE(count, 31u) << folder.first;
      EXPECT_LE(count, 32u) << folder.first;
    }
  }
  EXPECT_EQ(scan.warnings, std::vector<std::string>{over_the_scans_readings(tmpfs.path())});
  // Worded without counts: a flood that grows is still the one warning, logged once (its 8,194 files are past the
  // per-user folders' 8,192 lstat calls too, which says so once).
  for (uid_t uid = 5064; uid < 5128; ++uid) make_flooded_folder(tmpfs.path(), uid, 64);
  for (int poll = 0; poll < 2; ++poll) {
    const auto grown = scanner.scan(testing::unix_ns_now(), std::chrono::seconds(60));
    EXPECT_EQ(count_ok(grown), 2u);
    EXPECT_EQ(grown.readings.size(), kMaxReadingsPerScan);
    EXPECT_EQ(grown.warnings,
              (std::vector<std::string>{over_the_listing(tmpfs.path()), over_the_scans_readings(tmpfs.path())}));
  }
}

// Review: the listing budgets were per folder, so 256 per-user folders of 1,024 rank files still cost an lstat each
// (262,144 a poll: 1.2 s). The per-user folders share one budget: a poll's listing costs the top level's and that one
// however many folders there are, a small folder is listed whole and read at every poll, and the others are listed on
// from where they stopped, so every file is read within a few polls.
TEST_F(RankFileReaderTest, ManyFoldersShareOneListingBudget) {
  const TempDir tmpfs(testing::shared_memory_dir());
  const auto honest = tmpfs.path() / "9000";  // listed after the flood's folders until its cost is known
  std::filesystem::create_directory(honest);
  write_ranks(tmpfs, honest, 2);
  for (const auto& entry : std::filesystem::directory_iterator(honest))
    ASSERT_EQ(::chown(entry.path().c_str(), 9000, 9000), 0);
  ASSERT_EQ(::chown(honest.c_str(), 9000, 9000), 0);
  for (uid_t uid = 5000; uid < 5096; ++uid) make_flooded_folder(tmpfs.path(), uid, 64);
  // Per folder, each poll would make 97 + 96 x 64 + 2 = 6,243 lstat calls here.
  const ScanBudget budget{.entries = 2000, .stats = 1000};
  RankDirectoryScanner scanner(tmpfs.path(), budget);
  std::set<std::string> read;
  for (int poll = 0; poll < 10; ++poll) {
    const auto scan = scanner.scan(testing::unix_ns_now(), std::chrono::seconds(60));
    EXPECT_EQ(count_ok(scan), 2u) << "poll " << poll;
    // The top level's 97 folders (100 entries with ".", ".." and the writer's script), then the per-user folders'.
    EXPECT_LE(scan.listing_stats, 97 + budget.stats) << "poll " << poll;
    EXPECT_LE(scan.listing_entries, 100 + budget.entries) << "poll " << poll;
    EXPECT_EQ(scan.files_unread, 0u) << "names not reached are listed at the next poll, not counted";
    EXPECT_EQ(scan.warnings, std::vector<std::string>{over_the_listing(tmpfs.path(), budget)}) << "poll " << poll;
    for (const auto& reading : scan.readings) read.insert(reading.name);
  }
  EXPECT_EQ(read.size(), 96u * 64 + 2);  // ~10 names of each folder a poll
}

// The per-user folders are listed smallest first by what they cost when last listed whole, so that what the small
// ones leave goes to the large ones: one large folder beside ten small ones is listed 400 names a poll, not 45.
TEST_F(RankFileReaderTest, WhatSmallFoldersLeaveOfTheListingGoesToTheLargeOnes) {
  const TempDir tmpfs(testing::shared_memory_dir());
  make_flooded_folder(tmpfs.path(), 4000, 2000);  // first by name
  for (uid_t uid = 6000; uid < 6010; ++uid) make_flooded_folder(tmpfs.path(), uid, 10);
  RankDirectoryScanner scanner(tmpfs.path(), ScanBudget{.stats = 500});
  for (int poll = 0; poll < 5; ++poll) {
    const auto scan = scanner.scan(testing::unix_ns_now(), std::chrono::seconds(60));
    const auto counts = readings_by_folder_and_owner(scan);
    // At the first poll nothing is known yet: the large folder, listed first, is offered an equal share.
    EXPECT_EQ(counts.at({"4000", 4000}), poll == 0 ? 500u / 11 : 500u - 10 * 10) << "poll " << poll;
    for (uid_t uid = 6000; uid < 6010; ++uid) EXPECT_EQ(counts.at({std::to_string(uid), uid}), 10u) << uid;
    if (poll > 0) {
      EXPECT_EQ(scan.listing_stats, 11u + 500) << "poll " << poll;
    }
  }
}

// Per-user folders are read first, as select_ranks tracks their ranks first; the top level gets what they leave,
// shared between its owners, so one flooding owner there cannot take it all either.
TEST_F(RankFileReaderTest, TheTopLevelGetsWhatPerUserFoldersLeaveSharedBetweenItsOwners) {
  const TempDir tmpfs(testing::shared_memory_dir());
  write_ranks(tmpfs, tmpfs.path(), 5);
  for (int i = 0; i < 500; ++i) {
    const auto path = tmpfs.path() / fmt::format("rank{}-pid9{}.fsr", i, i);
    std::ofstream(path) << "junk";
    ASSERT_EQ(::chown(path.c_str(), 4242, 4242), 0);
  }
  make_flooded_folder(tmpfs.path(), 5000, 1000);
  make_flooded_folder(tmpfs.path(), 5001, 1000);
  const auto scan = scan_rank_directory(tmpfs.path(), testing::unix_ns_now(), std::chrono::seconds(60));
  EXPECT_EQ(count_ok(scan), 5u);
  EXPECT_EQ(scan.readings.size(), kMaxReadingsPerScan);
  const auto counts = readings_by_folder_and_owner(scan);
  EXPECT_EQ(counts.at({"5000", 5000}), 1000u);
  EXPECT_EQ(counts.at({"5001", 5001}), 1000u);
  EXPECT_EQ(counts.at({"", ::geteuid()}), 5u);
  EXPECT_EQ(counts.at({"", 4242}), 2048u - 2000 - 5);
  EXPECT_EQ(scan.files_unread, 500u - 43);
  EXPECT_EQ(scan.warnings, std::vector<std::string>{over_the_scans_readings(tmpfs.path())});
}

// The last ok readings a flooded top level keeps count against the scan's readings too, shared between owners.
TEST_F(RankFileReaderTest, ReadingsKeptFromEarlierPollsStayWithinTheScansReadings) {
  const TempDir tmpfs(testing::shared_memory_dir());
  std::vector<std::unique_ptr<RankFileWriter>> ranks;
  for (int r = 0; r < 6; ++r) {
    for (int i = 0; i < 100; ++i) std::ofstream(tmpfs.path() / fmt::format("junk{}-{}", r, i));
    RankRecord record;
    record.rank = r;
    record.pid = 100 + r;
    record.update_unix_ns = testing::unix_ns_now();
    const auto path = tmpfs.path() / fmt::format("rank{}-pid{}.fsr", r, 100 + r);
    ranks.push_back(std::make_unique<RankFileWriter>(path, record));
    const uid_t owner = r < 3 ? 1000 : 1001;
    ASSERT_EQ(::chown(path.c_str(), owner, owner), 0);
  }
  RankDirectoryScanner scanner(tmpfs.path(), ScanBudget{.entries = 50, .readings = 4});
  // 608 entries, 50 a poll: every rank is reached within 13 polls; from then on the four readings are two of each
  // owner's, whichever rank this poll's part of the listing holds.
  for (int poll = 0; poll < 30; ++poll) {
    const auto scan = scanner.scan(testing::unix_ns_now(), std::chrono::seconds(60));
    ASSERT_LE(scan.readings.size(), 4u) << "poll " << poll;
    if (poll >= 13) {
      EXPECT_EQ(count_ok(scan), 4u) << "poll " << poll;
      const auto counts = readings_by_folder_and_owner(scan);
      EXPECT_EQ(counts.at({"", 1000}), 2u) << "poll " << poll;
      EXPECT_EQ(counts.at({"", 1001}), 2u) << "poll " << poll;
    }
  }
}

// Audit: every all-digit name in the root cost a stat (1M of them: a 3.3 s poll). A name that
// the listing says is no folder costs none, and spends no budget a real per-user folder needs.
TEST_F(RankFileReaderTest, DigitNamesThatAreNoFoldersCostNoStat) {
  const TempDir tmpfs(testing::shared_memory_dir());
  for (int i = 0; i < 1000; ++i) std::ofstream(tmpfs.path() / std::to_string(100000 + i));
  const auto mine = tmpfs.path() / std::to_string(::geteuid());
  std::filesystem::create_directory(mine);
  write_ranks(tmpfs, mine, 2);
  const auto scan =
      scan_rank_directory(tmpfs.path(), testing::unix_ns_now(), std::chrono::seconds(60), ScanBudget{.stats = 3});
  EXPECT_EQ(count_ok(scan), 2u);
}

}  // namespace
}  // namespace fragscope::agent
