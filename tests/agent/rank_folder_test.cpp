// The rank directory's names and folders: which names are rank files and per-user folders, and
// a per-user folder opened only when it is a real folder owned by the uid its name states.
#include "agent/rank_folder.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "test_support.h"

namespace fragscope::agent {
namespace {

using testing::TempDir;

TEST(RankFolder, RankFileNamesAreTheHooks) {
  for (const char* name : {"rank0-pid1.fsr", "rank17-pid4242.fsr", "rank-1-pid99.fsr"})
    EXPECT_TRUE(is_rank_file_name(name)) << name;
  for (const char* name : {"rank0-pid1.fsr.checkpoint", "rank0-pid1.fsr.tmp", "rankX-pid1.fsr", "rank0-pid.fsr",
                           "rank0.fsr", "rank--1-pid2.fsr", "prank0-pid1.fsr", "rank0-pid1"})
    EXPECT_FALSE(is_rank_file_name(name)) << name;
}

TEST(RankFolder, UserFolderNamesAreOneDecimalUid) {
  EXPECT_EQ(user_folder_uid("0"), 0u);
  EXPECT_EQ(user_folder_uid("1000"), 1000u);
  EXPECT_EQ(user_folder_uid("4294967294"), 4294967294u);
  // no sign, no leading zero, not (uid_t)-1, nothing past 32 bits
  for (const char* name : {"", "01000", "+1000", "-1", "1000a", "4294967295", "4294967296", "rank0-pid1.fsr"})
    EXPECT_FALSE(user_folder_uid(name)) << name;
}

TEST(RankFolder, APerUserFolderOpensOnlyWhenItsOwnerIsTheUidItsNameStates) {
  TempDir dir;
  const std::string mine = std::to_string(::getuid());
  const std::string other = std::to_string(::getuid() + 4242);
  std::filesystem::create_directory(dir.path() / mine);
  std::filesystem::create_directory(dir.path() / other);  // ours, but named after someone else
  std::filesystem::create_directory_symlink(dir.path() / mine, dir.path() / std::to_string(::getuid() + 1));
  std::string problem;
  const auto root = open_rank_root(dir.path(), problem);
  ASSERT_TRUE(root) << problem;
  EXPECT_EQ(root->prefix, "");
  EXPECT_FALSE(root->owner);

  const auto folder = open_user_folder(root->fd.get(), mine, problem);
  ASSERT_TRUE(folder) << problem;
  EXPECT_EQ(folder->prefix, mine + "/");
  EXPECT_EQ(folder->owner, ::getuid());

  EXPECT_FALSE(open_user_folder(root->fd.get(), other, problem));
  EXPECT_EQ(problem, other + ": owned by uid " + mine + ", not by the uid its name states");
  EXPECT_FALSE(open_user_folder(root->fd.get(), std::to_string(::getuid() + 1), problem));
  EXPECT_EQ(problem, std::to_string(::getuid() + 1) + ": a symbolic link, not a folder");
  EXPECT_FALSE(open_user_folder(root->fd.get(), "shared", problem));
  EXPECT_EQ(problem, "shared: not a per-user folder name");
}

TEST(RankFolder, TheFolderOfARankFileAndItsOwnName) {
  TempDir dir;
  const std::string mine = std::to_string(::getuid());
  std::filesystem::create_directory(dir.path() / mine);
  std::string leaf, problem;
  const auto top = open_folder_of(dir.path(), "rank0-pid1.fsr", leaf, problem);
  ASSERT_TRUE(top) << problem;
  EXPECT_EQ(top->prefix, "");
  EXPECT_EQ(leaf, "rank0-pid1.fsr");
  const auto nested = open_folder_of(dir.path(), mine + "/rank3-pid7.fsr", leaf, problem);
  ASSERT_TRUE(nested) << problem;
  EXPECT_EQ(nested->prefix, mine + "/");
  EXPECT_EQ(leaf, "rank3-pid7.fsr");
  EXPECT_FALSE(open_folder_of(dir.path() / "missing", "rank0-pid1.fsr", leaf, problem));
  EXPECT_EQ(problem, "rank directory " + (dir.path() / "missing").string() + ": No such file or directory");
}

}  // namespace
}  // namespace fragscope::agent
