// read_text_file: the whole file, byte for byte, or a one-line error naming it; never a hang or
// a read past its cap (special files run in a child process with limits, see isolated_call.h).
// printable_excerpt: what an error may quote.
#include "inputs/text_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <gtest/gtest.h>

#include "../fixture_support.h"
#include "../isolated_call.h"
#include "inputs/acceptance_criteria.h"
#include "util/error.h"

namespace fragscope::inputs {
namespace {

namespace fs = std::filesystem;
using testing::CallOutcome;
using testing::run_isolated;

fs::path scratch() {
  const fs::path dir = fs::path(FRAGSCOPE_BINARY_DIR) / "text-file-test";
  fs::create_directories(dir);
  return dir;
}

// The cap and name of the memory_summary reader: any kind's would do.
std::string read_text(const fs::path& path) { return read_text_file(path, kMaxMemorySummaryBytes, "a memory_summary"); }

std::string error_of(const fs::path& path) {
  try {
    read_text(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ReadTextFile, ReadsARecordedFileByteForByte) {
  const fs::path path = testing::fixtures_dir() / "frag_oom_104" / "summary.txt";
  const std::string text = read_text(path);
  EXPECT_EQ(text.size(), fs::file_size(path));
  std::ifstream in(path, std::ios::binary);
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(text, expected.str());
}

TEST(ReadTextFile, KeepsNulBytesAndReadsEmptyFiles) {
  const fs::path binary = scratch() / "binary.bin";
  const std::string bytes("a\0b\r\n\xff", 6);
  std::ofstream(binary, std::ios::binary) << bytes;
  EXPECT_EQ(read_text(binary), bytes);
  const fs::path empty = scratch() / "empty.txt";
  std::ofstream{empty};
  EXPECT_EQ(read_text(empty), "");
}

TEST(ReadTextFile, MissingFileOrDirectoryIsAOneLineErrorNamingIt) {
  const fs::path missing = scratch() / "no such file.json";
  fs::remove(missing);
  const std::string e = error_of(missing);
  EXPECT_EQ(e.rfind(missing.string() + ": cannot open: ", 0), 0u) << e;
  EXPECT_NE(e.find("No such file"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
  const std::string d = error_of(scratch());
  EXPECT_EQ(d, scratch().string() + ": cannot read: is a directory");
}

TEST(ReadTextFile, UnreadableFileIsAnError) {
  if (geteuid() == 0) GTEST_SKIP() << "root reads files of any mode";
  const fs::path locked = scratch() / "locked.txt";
  std::ofstream(locked) << "secret";
  fs::permissions(locked, fs::perms::none);
  const std::string e = error_of(locked);
  fs::permissions(locked, fs::perms::owner_all);
  EXPECT_NE(e.find("Permission denied"), std::string::npos) << e;
}

TEST(ReadTextFile, FileAboveTheLimitIsRefusedNotTruncated) {
  const fs::path big = scratch() / "sparse.txt";
  std::ofstream{big};
  fs::resize_file(big, kMaxMemorySummaryBytes + 1);  // sparse: no disk used
  const std::string e = error_of(big);
  fs::remove(big);
  EXPECT_EQ(e, big.string() + ": larger than the 16.00 MiB a memory_summary may have");
}

TEST(ReadTextFile, EndlessDeviceIsRefusedNotReadUntilMemoryRunsOut) {
  // It read until memory ran out (check --criteria /dev/zero), then 'out of memory' without the path.
  const auto r = run_isolated([] { read_text("/dev/zero"); }, 10, rlim_t{2} << 30);
  EXPECT_EQ(r.outcome, CallOutcome::kInputError) << testing::to_string(r.outcome);
  EXPECT_EQ(r.message, "/dev/zero: cannot read: is a character device, not a file");
}

TEST(ReadTextFile, FifoWithoutWriterIsRefusedNotWaitedOn) {
  // open() blocked for a writer forever (check --smi FIFO hung). A FIFO without a writer now
  // reads as empty at once (a pipe is a legitimate input: `<(zcat smi.csv.gz)`), and the reader
  // of its kind refuses the empty input, naming it.
  const fs::path fifo = scratch() / "pipe";
  fs::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const auto text = run_isolated(
      [&] {
        if (!read_text(fifo).empty()) throw std::runtime_error("bytes from a FIFO that has no writer");
      },
      5);
  const auto r = run_isolated([&] { read_acceptance_criteria_file(fifo); }, 5);
  fs::remove(fifo);
  EXPECT_EQ(text.outcome, CallOutcome::kReturned) << testing::to_string(text.outcome) << " " << text.message;
  EXPECT_EQ(r.outcome, CallOutcome::kInputError) << testing::to_string(r.outcome);
  EXPECT_EQ(r.message.rfind(fifo.string() + ": ", 0), 0u) << r.message;
}

TEST(PrintableExcerpt, ReplacesUnprintableBytesAndCutsLongText) {
  EXPECT_EQ(printable_excerpt("plain text"), "plain text");
  EXPECT_EQ(printable_excerpt(std::string("a\nb\tc\0d\x7f\xc3\xa9", 10)), "a?b?c?d???");
  EXPECT_EQ(printable_excerpt(std::string(60, 'x')), std::string(60, 'x'));  // exactly the limit: whole
  EXPECT_EQ(printable_excerpt(std::string(61, 'x')), std::string(60, 'x') + "...");
  EXPECT_EQ(printable_excerpt("abcdef", 3), "abc...");
  EXPECT_EQ(printable_excerpt("", 3), "");
}

}  // namespace
}  // namespace fragscope::inputs
