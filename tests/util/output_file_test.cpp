// Reports and criteria files: written whole or not at all, never onto an input, and a write
// that fails says so.
#include "util/output_file.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <csignal>
#include <functional>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "util/error.h"

namespace fragscope {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("output_file_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string error_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

TEST(OutputFile, WritesAndReplacesWholeFiles) {
  const fs::path dir = scratch("plain");
  const std::string report = (dir / "report.html").string();
  write_output_file(report, "first", {}, "the report");
  EXPECT_EQ(slurp(report), "first");
  write_output_file(report, "second", {}, "the report");
  EXPECT_EQ(slurp(report), "second");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1) << "a temporary was left";
}

// Review: an output path that is a FIFO nobody reads blocked open(2) for good.
TEST(OutputFile, APipeNobodyReadsIsAnErrorNotAHang) {
  const fs::path dir = scratch("fifo");
  const fs::path fifo = dir / "report.html";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { write_output_file(fifo.string(), "<html/>", {}, "the HTML report"); }),
            fifo.string() + ": cannot write the HTML report (a pipe no process reads)");
}

TEST(OutputFile, NeverOverwritesAnInputWhateverThePathSays) {
  const fs::path dir = scratch("input");
  const fs::path snapshot = dir / "snapshot.pickle.zst";
  std::ofstream(snapshot) << "the only snapshot";
  fs::create_symlink(snapshot, dir / "link.html");
  const FileIdentity inputs[] = {*identity_of(snapshot.string())};
  for (const fs::path& target : {snapshot, dir / "link.html", dir / "." / "snapshot.pickle.zst"}) {
    EXPECT_EQ(error_of([&] { write_output_file(target.string(), "<html>", inputs, "the HTML report"); }),
              target.string() + ": refusing to write the HTML report onto an input");
  }
  EXPECT_EQ(slurp(snapshot), "the only snapshot");
}

TEST(OutputFile, AFailedWriteKeepsTheOldFile) {
  const fs::path dir = scratch("failed");
  const fs::path report = dir / "report.html";
  std::ofstream(report) << "the old report";
  // A child whose files may not grow past 16 bytes: the write of the new report fails midway.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{16, 16};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      write_output_file(report.string(), std::string(4096, 'n'), {}, "the HTML report");
    } catch (const InputError& e) {
      const std::string what = e.what();
      ::_exit(what == report.string() + ": cannot write the HTML report (File too large)" ? 0 : 2);
    }
    ::_exit(1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_EQ(slurp(report), "the old report");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1) << "a temporary was left";
}

TEST(OutputFile, DevicesAreWrittenInPlaceAndTheirErrorsReported) {
  EXPECT_EQ(error_of([] { write_output_file("/dev/full", "{}", {}, "the criteria file"); }),
            "/dev/full: cannot write the criteria file (No space left on device)");
  write_output_file("/dev/null", "{}", {}, "the criteria file");  // still a device afterwards
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_EQ(error_of([] { write_output_file("/nonexistent/dir/report.html", "x", {}, "the HTML report"); }),
            "/nonexistent/dir/report.html: cannot write the HTML report (No such file or directory)");
}

}  // namespace
}  // namespace fragscope
