// A folder's entries a batch at a time: every entry once with its type, listed on from a position it
// gave, and no more fetched from the kernel than asked for.
#include "agent/folder_entries.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "agent/rank_folder.h"
#include "test_support.h"

namespace fragscope::agent {
namespace {

using testing::TempDir;

FileDescriptor open_folder(const std::filesystem::path& path) {
  return FileDescriptor(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
}

// The names listed from `position` to the end, `wanted` at a time.
std::vector<std::string> names_from(int fd, off_t position, std::size_t wanted) {
  FolderEntries entries(fd, position);
  std::vector<std::string> names;
  while (const auto entry = entries.next(wanted)) names.emplace_back(entry->name);
  EXPECT_EQ(entries.error(), 0);
  return names;
}

TEST(FolderEntries, ListsEveryEntryOnceWithItsType) {
  const TempDir dir(testing::shared_memory_dir());
  std::ofstream(dir.path() / "rank0-pid1.fsr");
  std::filesystem::create_directory(dir.path() / "1000");
  std::filesystem::create_symlink("rank0-pid1.fsr", dir.path() / "link");
  ASSERT_EQ(::mkfifo((dir.path() / "fifo").c_str(), 0600), 0);
  const FileDescriptor fd = open_folder(dir.path());
  FolderEntries entries(fd.get(), 0);
  std::map<std::string, unsigned char> types;
  while (const auto entry = entries.next(1)) EXPECT_TRUE(types.emplace(entry->name, entry->type).second);
  EXPECT_EQ(types, (std::map<std::string, unsigned char>{{".", DT_DIR},
                                                         {"..", DT_DIR},
                                                         {"1000", DT_DIR},
                                                         {"fifo", DT_FIFO},
                                                         {"link", DT_LNK},
                                                         {"rank0-pid1.fsr", DT_REG}}));
}

TEST(FolderEntries, AListingGoesOnFromAPositionItGave) {
  const TempDir dir(testing::shared_memory_dir());
  for (int i = 0; i < 300; ++i) std::ofstream(dir.path() / ("rank" + std::to_string(i) + "-pid1.fsr"));
  const FileDescriptor fd = open_folder(dir.path());
  const std::vector<std::string> all = names_from(fd.get(), 0, 1000);
  ASSERT_EQ(all.size(), 302u);
  // Stopped at the 100th entry (another descriptor: the agent opens the folder again at the next poll).
  FolderEntries entries(fd.get(), 0);
  for (int i = 0; i < 99; ++i) ASSERT_TRUE(entries.next(10));
  const auto hundredth = entries.next(10);
  ASSERT_TRUE(hundredth);
  EXPECT_EQ(hundredth->name, all[99]);
  const FileDescriptor again = open_folder(dir.path());
  EXPECT_EQ(names_from(again.get(), hundredth->position, 10), std::vector<std::string>(all.begin() + 99, all.end()));
}

// Review: readdir(3) fetched 32 KiB of names (~680 rank files') for a listing allowed a few dozen, in every folder.
TEST(FolderEntries, FetchesNoMoreThanAboutWhatIsWanted) {
  const TempDir dir(testing::shared_memory_dir());
  for (int i = 0; i < 2000; ++i) std::ofstream(dir.path() / ("rank" + std::to_string(i) + "-pid1.fsr"));
  const FileDescriptor fd = open_folder(dir.path());
  FolderEntries entries(fd.get(), 0);
  ASSERT_TRUE(entries.next(1));
  // The descriptor stands after the batch fetched: 1 KiB, 26 entries of these names (readdir(3): 32 KiB, ~800).
  const off_t after_batch = ::lseek(fd.get(), 0, SEEK_CUR);
  ASSERT_GT(after_batch, 0);
  const FileDescriptor again = open_folder(dir.path());
  const std::size_t fetched = 2002 - names_from(again.get(), after_batch, 1000).size();
  EXPECT_GE(fetched, 2u);
  EXPECT_LE(fetched, 32u);
}

TEST(FolderEntries, AFileIsNoFolderToList) {
  const TempDir dir;
  std::ofstream(dir.path() / "file");
  const FileDescriptor fd(::open((dir.path() / "file").c_str(), O_RDONLY | O_CLOEXEC));
  FolderEntries entries(fd.get(), 0);
  EXPECT_FALSE(entries.next(1));
  EXPECT_EQ(entries.error(), ENOTDIR);
}

}  // namespace
}  // namespace fragscope::agent
