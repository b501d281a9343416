// Ranks for inputs without rank<N> in their paths: several folders are several processes, told
// apart with a warning; one process's files (two dumps, its log) stay one rank; what cannot be
// told apart is merged with a warning, never silently.
#include "diagnose/rank_assignment.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "../fixture_support.h"
#include "diagnose/doctor.h"
#include "doctor_fixture_files.h"
#include "field_recordings.h"
#include "../doctor_options.h"

namespace fragscope::diagnose {
namespace {

namespace fs = std::filesystem;
using fragscope::testing::doctor_scratch_dir;
using fragscope::testing::field_dir;
using fragscope::testing::fixtures_dir;

/// `names`' user files copied to scratch/NAME_i/ (node-style folders without a rank in them).
fs::path nodes(const std::string& scratch, const std::vector<std::string>& names,
               const std::vector<std::string>& folders) {
  const fs::path root = doctor_scratch_dir() / scratch;
  fs::remove_all(root);
  for (std::size_t i = 0; i < names.size(); ++i) {
    fs::create_directories(root / folders[i]);
    fs::copy_file(field_dir(names[i]) / "oom_snapshot.pickle.zst", root / folders[i] / "oom_snapshot.pickle.zst");
    fs::copy_file(field_dir(names[i]) / "train.log", root / folders[i] / "train.log");
  }
  return root;
}

TEST(RankAssignment, SnapshotsFromTwoFoldersAreTwoRanks) {
  const fs::path root = nodes("two-nodes", {"hft_edge", "hft_lo"}, {"node-a", "node-b"});
  const DoctorInputs in = collect_doctor_inputs({root.string()});
  ASSERT_EQ(in.snapshots.size(), 2u);
  EXPECT_EQ(in.snapshots[0].rank, 0);
  EXPECT_EQ(in.snapshots[1].rank, 1);
  ASSERT_FALSE(in.warnings.empty());
  EXPECT_NE(in.warnings.front().find("each folder read as one rank"), std::string::npos) << in.warnings.front();
  DoctorOptions options = fragscope::testing::doctor_options();
  options.threads = 2;
  const Diagnosis d = run_doctor(in, options);
  EXPECT_EQ(d.ranks.size(), 2u);
  EXPECT_EQ(d.warnings, in.warnings);
}

TEST(RankAssignment, OneProcesssTwoDumpsStayOneRank) {
  const fs::path src = fixtures_dir() / "frag_oom_observer";
  const DoctorInputs in =
      collect_doctor_inputs({(src / "snapshot.pickle.zst").string(), (src / "snapshot_at_oom.pickle.zst").string()});
  ASSERT_EQ(in.snapshots.size(), 2u);
  EXPECT_EQ(in.snapshots[0].rank, std::nullopt);
  EXPECT_EQ(in.snapshots[1].rank, std::nullopt);
  EXPECT_TRUE(in.warnings.empty());
}

TEST(RankAssignment, TheSameRankFromTwoFoldersIsMergedWithAWarning) {
  const fs::path root = nodes("same-rank", {"hft_edge", "hft_lo"}, {"a/rank0", "b/rank0"});
  const DoctorInputs in = collect_doctor_inputs({root.string()});
  ASSERT_EQ(in.snapshots.size(), 2u);
  EXPECT_EQ(in.snapshots[0].rank, 0);
  EXPECT_EQ(in.snapshots[1].rank, 0);
  ASSERT_EQ(in.warnings.size(), 1u);
  EXPECT_NE(in.warnings[0].find("merged"), std::string::npos) << in.warnings[0];
}

}  // namespace
}  // namespace fragscope::diagnose
