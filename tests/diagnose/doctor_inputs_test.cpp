// Inputs recognised by content in files and folders, ranks from paths, one-line errors.
#include "diagnose/doctor_inputs.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "doctor_fixture_files.h"
#include "util/error.h"

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

TEST(DoctorInputs, ABrokenSnapshotIsAnErrorNotSilence) {
  const fs::path bad = doctor_scratch_dir() / "truncated.pickle.zst";
  {
    std::ifstream in(fixtures_dir() / "capacity_oom" / "snapshot.pickle.zst", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(bad, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  EXPECT_THROW(collect_doctor_inputs({bad.string()}), InputError);
}

}  // namespace
}  // namespace fragscope::diagnose
