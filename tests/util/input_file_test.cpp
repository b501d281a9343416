// Opening and reading any path without surprises: devices, sockets, directories and /proc files
// get one line each, a FIFO without a writer never blocks, caps hold for pipes as for files, and
// lines stream in bounded memory.
#include "util/input_file.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "util/error.h"

namespace fragscope {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

fs::path scratch(const std::string& name) {
  const fs::path path = fs::path(::testing::TempDir()) / ("input_file_" + name);
  fs::remove_all(path);
  return path;
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

TEST(InputFile, SpecialFilesGetOneLineEach) {
  EXPECT_EQ(error_of([] { open_input("/dev/zero"); }), "/dev/zero: cannot read: is a character device, not a file");
  EXPECT_EQ(error_of([] { open_input("/dev/null"); }), "/dev/null: cannot read: is a character device, not a file");
  EXPECT_EQ(error_of([] { open_input("/proc/self/status"); }),
            "/proc/self/status: cannot read: is a file of /proc or /sys, not an artifact");
  const fs::path dir = scratch("dir");
  fs::create_directories(dir);
  EXPECT_EQ(error_of([&] { open_input(dir.string()); }), dir.string() + ": cannot read: is a directory");
  EXPECT_EQ(error_of([] { open_input("/nonexistent/x"); }), "/nonexistent/x: cannot open: No such file or directory");

  const fs::path socket_path = scratch("socket");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof address.sun_path - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  EXPECT_EQ(error_of([&] { open_input(socket_path.string()); }),
            socket_path.string() + ": cannot read: is a socket, not a file");
  ::close(fd);
  EXPECT_EQ(file_kind(socket_path.string()), FileKind::kSocket);
  EXPECT_EQ(file_kind("/dev/zero"), FileKind::kCharDevice);
}

TEST(InputFile, AFifoWithoutAWriterReadsEmptyAtOnce) {
  const fs::path fifo = scratch("lonely_fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto read = std::async(std::launch::async, [&] { return read_bounded(fifo.string(), 1024, "a test input"); });
  ASSERT_EQ(read.wait_for(std::chrono::seconds(5)), std::future_status::ready) << "blocked on a FIFO without a writer";
  EXPECT_EQ(read.get(), "");
}

TEST(InputFile, CapsHoldForPipesAsForFiles) {
  const fs::path file = scratch("big.txt");
  write(file, std::string(2000, 'x'));
  EXPECT_EQ(read_bounded(file.string(), 2000, "a test input").size(), 2000u);
  EXPECT_EQ(error_of([&] { read_bounded(file.string(), 1999, "a test input"); }),
            file.string() + ": larger than the 1.95 KiB a test input may have");

  // A pipe has no size up front: the cap stops it after cap + 1 bytes, whatever the writer sends.
  const fs::path fifo = scratch("endless_fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::signal(SIGPIPE, SIG_IGN);  // the writer outlives its reader
  std::thread writer([&] {
    std::ofstream out(fifo, std::ios::binary);
    const std::string chunk(1 << 16, 'y');
    for (int i = 0; i < 64 && out; ++i) out << chunk;  // 4 MiB, far past the cap
  });
  // The reader opens first (no writer yet reads as empty): wait for the writer to be there.
  std::string what;
  for (int attempt = 0; attempt < 100 && what.empty(); ++attempt) {
    try {
      if (read_bounded(fifo.string(), 100000, "a test input").empty())
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } catch (const InputError& e) {
      what = e.what();
    }
  }
  EXPECT_EQ(what, fifo.string() + ": larger than the 97.66 KiB a test input may have");
  writer.join();
}

TEST(LineReader, StreamsLinesAndSaysWhetherTheLastWasCut) {
  const fs::path file = scratch("lines.txt");
  write(file, "one\n\nthree\r\nfour, cut");
  LineReader lines(open_input(file.string()), 64, LineReader::LongLines::kError, 0, "a test input");
  std::vector<std::string> got;
  std::vector<bool> complete;
  std::string_view line;
  while (lines.next(line)) {
    got.emplace_back(line);
    complete.push_back(lines.line_complete());
  }
  EXPECT_EQ(got, (std::vector<std::string>{"one", "", "three\r", "four, cut"}));
  EXPECT_EQ(complete, (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(lines.line_number(), 4u);
}

TEST(LineReader, LongLinesAreAnErrorOrCut) {
  const fs::path file = scratch("long.txt");
  write(file, "short\n" + std::string(3'000'000, 'z') + "\nafter\n" + std::string(100, 'w'));
  {
    LineReader lines(open_input(file.string()), 1000, LineReader::LongLines::kError, 0, "a test input");
    std::string_view line;
    ASSERT_TRUE(lines.next(line));
    EXPECT_EQ(error_of([&] { lines.next(line); }), file.string() + ":2: line longer than 1000 bytes");
  }
  LineReader lines(open_input(file.string()), 1000, LineReader::LongLines::kCut, 0, "a test input");
  std::vector<std::string> got;
  std::string_view line;
  while (lines.next(line)) got.emplace_back(line);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[1], std::string(1000, 'z'));  // its 2,999,000 other bytes skipped, not held
  EXPECT_EQ(got[2], "after");
  EXPECT_EQ(got[3], std::string(100, 'w'));
  EXPECT_EQ(lines.line_number(), 4u);
}

TEST(LineReader, TheWholeInputIsCappedToo) {
  const fs::path file = scratch("many_lines.txt");
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "line\n";
  write(file, text);
  LineReader lines(open_input(file.string()), 100, LineReader::LongLines::kError, 1 << 16, "a test input");
  std::string_view line;
  EXPECT_EQ(error_of([&] {
              while (lines.next(line)) {
              }
            }),
            file.string() + ": larger than the 64.00 KiB a test input may have");
}

}  // namespace
}  // namespace fragscope
