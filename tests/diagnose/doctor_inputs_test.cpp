// Inputs recognised by content in files and folders, ranks from paths, one-line errors; damaged
// and special files skipped with their reason; walks that stay in the folder given.
#include "diagnose/doctor_inputs.h"

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <map>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "diagnose/doctor.h"
#include "doctor_fixture_files.h"
#include "util/error.h"
#include "../doctor_options.h"

namespace fragscope::diagnose {
namespace {

namespace fs = std::filesystem;
using fragscope::testing::doctor_scratch_dir;
using fragscope::testing::doctor_user_files;
using fragscope::testing::fixtures_dir;

TEST(DoctorInputs, RankFromPath) {
  EXPECT_EQ(rank_from_path("out/rank3.pickle"), 3);
  EXPECT_EQ(rank_from_path("out/RANK_12/steps.jsonl"), 12);
  EXPECT_EQ(rank_from_path("rank1/run/rank-7.pickle.zst"), 7);
  EXPECT_EQ(rank_from_path("out/snapshot.pickle"), std::nullopt);
  EXPECT_EQ(rank_from_path("ranking/steps.jsonl"), std::nullopt);
}

TEST(DoctorInputs, EveryKindIsRecognisedByContentWhateverItsName) {
  const fs::path dir = doctor_scratch_dir() / "renamed";
  fs::remove_all(dir);
  fs::create_directories(dir / "rank5");
  const fs::path src = fixtures_dir() / "frag_oom_104";
  fs::copy_file(src / "snapshot.pickle.zst", dir / "rank5" / "a.bin");
  fs::copy_file(src / "steps.jsonl", dir / "rank5" / "b.txt");
  fs::copy_file(src / "stats.json", dir / "c");
  fs::copy_file(src / "smi.csv", dir / "d");
  fs::copy_file(src / "summary.txt", dir / "e");
  for (const std::string& file : doctor_user_files("frag_oom_104"))
    if (file.ends_with(".log")) fs::copy_file(file, dir / "f");
  std::ofstream(dir / "notes.md") << "nothing to see\n";
  const DoctorInputs in = collect_doctor_inputs({dir.string()});
  ASSERT_EQ(in.snapshots.size(), 1u);
  EXPECT_EQ(in.snapshots[0].rank, 5);
  ASSERT_EQ(in.telemetry.size(), 1u);
  EXPECT_EQ(in.telemetry[0].rank, 5);
  EXPECT_EQ(in.stats.size(), 1u);
  EXPECT_EQ(in.smi.size(), 1u);
  EXPECT_EQ(in.summaries.size(), 1u);
  ASSERT_EQ(in.logs.size(), 1u);
  EXPECT_EQ(in.logs[0].ooms.size(), 1u);
  ASSERT_EQ(in.unrecognised.size(), 1u);
  EXPECT_NE(in.unrecognised[0].find("notes.md"), std::string::npos);
}

TEST(DoctorInputs, MissingPathIsAOneLineInputError) {
  try {
    collect_doctor_inputs({"/nonexistent/rank0.pickle"});
    FAIL();
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("/nonexistent/rank0.pickle"), std::string::npos);
    EXPECT_EQ(what.find('\n'), std::string::npos);
  }
}

/// `from` cut to its first `fraction` of bytes, written to `to`.
void write_cut(const fs::path& from, const fs::path& to, double fraction) {
  std::ifstream in(from, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(to, std::ios::binary) << bytes.substr(0, static_cast<std::size_t>(bytes.size() * fraction));
}

// Issue 16: one damaged file aborted the doctor (exit 2) even when the rest sufficed.
TEST(DoctorInputs, ADamagedFileIsSkippedWithItsReasonAndTheRestIsRead) {
  const fs::path dir = doctor_scratch_dir() / "damaged";
  fs::remove_all(dir);
  fs::create_directories(dir / "rank0");
  fs::create_directories(dir / "rank1");
  const fs::path src = fixtures_dir() / "frag_oom_104";
  fs::copy_file(src / "snapshot.pickle.zst", dir / "rank0" / "snapshot.pickle.zst");
  write_cut(src / "snapshot.pickle.zst", dir / "rank1" / "snapshot.pickle.zst", 0.5);  // half dumped
  fs::copy_file(src / "stats.json", dir / "rank0" / "stats.json");
  std::ofstream(dir / "smi.csv") << "index, memory.used [MiB]\n0, lots\n";  // malformed
  // A crash cut the last line of steps.jsonl: what precedes it is read.
  std::ifstream steps(src / "steps.jsonl");
  const std::string text((std::istreambuf_iterator<char>(steps)), {});
  std::ofstream(dir / "rank0" / "steps.jsonl") << text << R"({"step": 99, "data_wait_ms": 1.)";

  const DoctorInputs in = collect_doctor_inputs({dir.string()});
  ASSERT_EQ(in.snapshots.size(), 1u);
  EXPECT_EQ(in.snapshots[0].rank, 0);
  ASSERT_EQ(in.telemetry.size(), 1u);
  EXPECT_TRUE(in.telemetry[0].cut_last_line.has_value());
  EXPECT_EQ(in.stats.size(), 1u);
  ASSERT_EQ(in.skipped.size(), 2u);
  EXPECT_EQ(in.skipped[0].path, (dir / "rank1" / "snapshot.pickle.zst").string());
  EXPECT_EQ(in.skipped[0].reason, "truncated zstd stream (ends inside a frame)");
  EXPECT_EQ(in.skipped[1].path, (dir / "smi.csv").string());
  EXPECT_EQ(in.skipped[1].reason, "line 2: column memory.used: cannot read \"lots\"");
  EXPECT_EQ(in.files.size(), 5u);
}

TEST(DoctorInputs, AWalkReadsNoFileWhoseNameWouldForgeTheReport) {
  // Whoever may write a shared folder names its files: a newline, an escape or an override would act on the report.
  const fs::path dir = doctor_scratch_dir() / "names";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path src = fixtures_dir() / "frag_oom_104" / "snapshot.pickle.zst";
  fs::copy_file(src, dir / "snapshot.pickle.zst");
  for (const char* name : {"a\nverdict: ok.pickle.zst", "b\x1b[2J.pickle.zst", "c\xe2\x80\xaeyp.exe.pickle.zst",
                           "d\xff.pickle.zst"})
    fs::copy_file(src, dir / name);
  const DoctorInputs in = collect_doctor_inputs({dir.string()});
  ASSERT_EQ(in.snapshots.size(), 1u);
  EXPECT_EQ(in.snapshots[0].path, (dir / "snapshot.pickle.zst").string());
  ASSERT_EQ(in.skipped.size(), 4u);
  for (const auto& skipped : in.skipped)
    EXPECT_EQ(skipped.reason,
              "a name with a control character, a bidirectional override or bytes that are not UTF-8: not read");
}

TEST(DoctorInputs, NothingUsableLeftIsAnErrorNamingWhatWasSkipped) {
  const fs::path bad = doctor_scratch_dir() / "truncated.pickle.zst";
  write_cut(fixtures_dir() / "capacity_oom" / "snapshot.pickle.zst", bad, 0.5);
  const DoctorInputs in = collect_doctor_inputs({bad.string()});
  ASSERT_EQ(in.skipped.size(), 1u);
  try {
    run_doctor(in, fragscope::testing::doctor_options());
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "doctor: no usable input: 1 skipped (first: " + bad.string() + ": truncated zstd stream (ends inside a "
              "frame)); give snapshots, steps.jsonl, memory_stats JSON, nvidia-smi CSV, memory_summary text or a log "
              "with the OOM message");
  }
}

// Issue 16: `doctor` followed a symlink to `/` and blocked on /proc/kmsg.
TEST(DoctorInputs, WalksStayInTheFolderAndSkipSpecialFiles) {
  const fs::path dir = doctor_scratch_dir() / "walk";
  fs::remove_all(dir);
  fs::create_directories(dir / "run" / "rank0");
  fs::copy_file(fixtures_dir() / "frag_oom_104" / "stats.json", dir / "run" / "rank0" / "stats.json");
  fs::create_directory_symlink("/", dir / "run" / "root");
  fs::create_directory_symlink("rank0", dir / "run" / "again");  // inside: followed, read once
  fs::create_directory_symlink("..", dir / "run" / "rank0" / "up");  // a loop
  fs::create_symlink("/dev/zero", dir / "run" / "zero");
  fs::create_symlink("/nonexistent", dir / "run" / "dangling");
  ASSERT_EQ(::mkfifo((dir / "run" / "fifo").c_str(), 0600), 0);

  auto collect = std::async(std::launch::async, [&] { return collect_doctor_inputs({(dir / "run").string()}); });
  ASSERT_EQ(collect.wait_for(std::chrono::seconds(20)), std::future_status::ready) << "the walk blocked";
  const DoctorInputs in = collect.get();
  EXPECT_EQ(in.stats.size(), 1u);
  std::map<std::string, std::string> skipped;
  for (const SkippedInput& s : in.skipped) skipped[fs::path(s.path).filename().string()] = s.reason;
  EXPECT_EQ(skipped["root"], "a symlink to a folder outside the one given: not followed");
  EXPECT_EQ(skipped["zero"], "a character device, not a regular file");
  EXPECT_EQ(skipped["dangling"], "a symlink that leads nowhere");
  EXPECT_EQ(skipped["fifo"], "a FIFO, not a regular file: the doctor reads each file more than once");
  EXPECT_EQ(skipped.size(), 4u);
}

TEST(DoctorInputs, AFolderOfJunkIsReadUpToTheCap) {
  const fs::path dir = doctor_scratch_dir() / "junk";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (std::size_t i = 0; i <= kMaxWalkedFiles; ++i) std::ofstream(dir / fmt::format("junk{:05}.txt", i)) << "x\n";
  const DoctorInputs in = collect_doctor_inputs({dir.string()});
  EXPECT_EQ(in.unrecognised.size(), kMaxWalkedFiles);
  ASSERT_EQ(in.skipped.size(), 1u);
  EXPECT_EQ(in.skipped[0].reason, "more than 10000 files: this one and the rest were not read");
  fs::remove_all(dir);
}

TEST(DoctorInputs, ASpecialFileGivenByNameIsSkippedWithOneLine) {
  const DoctorInputs in = collect_doctor_inputs({"/dev/zero", "/proc/self/status"});
  ASSERT_EQ(in.skipped.size(), 2u);
  EXPECT_EQ(in.skipped[0].reason, "a character device, not a regular file");
  EXPECT_EQ(in.skipped[1].reason, "cannot read: is a file of /proc or /sys, not an artifact");
}

}  // namespace
}  // namespace fragscope::diagnose
