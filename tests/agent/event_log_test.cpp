#include "agent/event_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.h"
#include "util/error.h"

namespace fragscope::agent {
namespace {

using testing::TempDir;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// This process's descriptors open on `path`.
std::vector<int> descriptors_of(const std::filesystem::path& path) {
  std::vector<int> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code gone;
    if (std::filesystem::read_symlink(entry.path(), gone) == path) found.push_back(std::stoi(entry.path().filename()));
  }
  return found;
}

std::string error_of(const std::filesystem::path& path) {
  try {
    EventLogFile log(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

// Audit: the event log was an std::ofstream, whose descriptor every child process inherits.
TEST(EventLogFileTest, AppendsThroughADescriptorNoChildProcessInherits) {
  const TempDir dir;
  const auto path = dir.path() / "events.jsonl";
  std::ofstream(path) << "{\"event\":\"earlier\"}\n";
  const auto children_fds = dir.path() / "children-fds";
  {
    EventLogFile log(path);
    log << "{\"event\":\"start\"}\n" << std::flush;
    EXPECT_EQ(read_file(path), "{\"event\":\"earlier\"}\n{\"event\":\"start\"}\n");
    const auto fds = descriptors_of(path);
    ASSERT_EQ(fds.size(), 1u);
    EXPECT_NE(::fcntl(fds[0], F_GETFD) & FD_CLOEXEC, 0);
    EXPECT_NE(::fcntl(fds[0], F_GETFL) & O_APPEND, 0);
    // system() forks and execs a shell that closes nothing: what it lists is what it inherited.
    ASSERT_EQ(std::system(("ls -l /proc/$$/fd > " + children_fds.string()).c_str()), 0);
    log << "{\"event\":\"stop\"}\n";  // no flush: the destructor writes it
  }
  EXPECT_EQ(read_file(children_fds).find(path.string()), std::string::npos) << read_file(children_fds);
  EXPECT_EQ(read_file(path), "{\"event\":\"earlier\"}\n{\"event\":\"start\"}\n{\"event\":\"stop\"}\n");
}

TEST(EventLogFileTest, ANewLogIsPrivateToTheAgentsUser) {
  const TempDir dir;
  const auto path = dir.path() / "events.jsonl";
  EventLogFile(path) << "{}\n";
  struct stat info {};
  ASSERT_EQ(::lstat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0600u);
  EXPECT_EQ(read_file(path), "{}\n");
}

TEST(EventLogFileTest, ALinkPlantedAtThePathIsNeverFollowed) {
  const TempDir dir;
  std::ofstream(dir.path() / "victim") << "precious\n";
  const auto path = dir.path() / "events.jsonl";
  std::filesystem::create_symlink(dir.path() / "victim", path);
  EXPECT_EQ(error_of(path),
            path.string() + ": cannot open the event log for appending: a symbolic link (never followed)");
  EXPECT_EQ(read_file(dir.path() / "victim"), "precious\n");
}

// Review: an event log path that is a FIFO nobody reads blocked the agent before it listened.
TEST(EventLogFileTest, APipeNobodyReadsIsAnErrorNotAHang) {
  const TempDir dir;
  const auto fifo = dir.path() / "events";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of(fifo), fifo.string() + ": cannot open the event log for appending: a pipe no process reads");
}

TEST(EventLogFileTest, AnUnopenablePathIsAOneLineError) {
  EXPECT_EQ(error_of("/nonexistent/events.jsonl"),
            "/nonexistent/events.jsonl: cannot open the event log for appending: No such file or directory");
}

// A file name is any bytes: an event naming one that is not UTF-8 is still one line of JSON (nlohmann's dump throws
// on it, which ended the agent).
TEST(EventLineTest, InvalidUtf8BecomesTheReplacementCharacter) {
  const std::string line = event_line({{"event", "checkpoint_request_removed"}, {"path", "/r/1000/\xff.fsr"}});
  EXPECT_EQ(line, "{\"event\":\"checkpoint_request_removed\",\"path\":\"/r/1000/\xef\xbf\xbd.fsr\"}\n");
}

}  // namespace
}  // namespace fragscope::agent
