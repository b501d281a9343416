// read_text_file: the whole file, byte for byte, or a one-line error naming it; never a hang or
// an unbounded read (special files run in a child process with limits, see isolated_call.h).
// printable_excerpt: what an error may quote.
#include "inputs/text_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "../fixture_support.h"
#include "../isolated_call.h"
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

std::string error_of(const fs::path& path) {
  try {
    read_text_file(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ReadTextFile, ReadsARecordedFileByteForByte) {
  const fs::path path = testing::fixtures_dir() / "frag_oom_104" / "summary.txt";
  const std::string text = read_text_file(path);
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
  EXPECT_EQ(read_text_file(binary), bytes);
  const fs::path empty = scratch() / "empty.txt";
  std::ofstream{empty};
  EXPECT_EQ(read_text_file(empty), "");
}

TEST(ReadTextFile, MissingFileOrDirectoryIsAOneLineErrorNamingIt) {
  const fs::path missing = scratch() / "no such file.json";
  fs::remove(missing);
  const std::string e = error_of(missing);
  EXPECT_EQ(e.rfind(missing.string() + ": cannot read", 0), 0u) << e;
  EXPECT_NE(e.find("No such file"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
  const std::string d = error_of(scratch());
  EXPECT_EQ(d, scratch().string() + ": cannot read (is a directory)");
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
  fs::resize_file(big, kMaxTextFileBytes + 1);  // sparse: no disk used
  const std::string e = error_of(big);
  fs::remove(big);
  EXPECT_NE(e.find(big.string() + ": cannot read"), std::string::npos) << e;
  EXPECT_NE(e.find(std::to_string(kMaxTextFileBytes + 1)), std::string::npos) << e;
}

TEST(ReadTextFile, EndlessDeviceIsRefusedNotReadUntilMemoryRunsOut) {
  GTEST_SKIP()
      << "bug: inputs/text_file.cpp reads a non-regular file with no size limit: /dev/zero "
         "(e.g. check --criteria /dev/zero) reads until memory runs out, then 'out of memory' without the path";
  const auto r = run_isolated([] { read_text_file("/dev/zero"); }, 10, rlim_t{2} << 30);
  EXPECT_EQ(r.outcome, CallOutcome::kInputError) << testing::to_string(r.outcome);
  EXPECT_EQ(r.message.rfind("/dev/zero: ", 0), 0u) << r.message;
}

TEST(ReadTextFile, FifoWithoutWriterIsRefusedNotWaitedOn) {
  GTEST_SKIP() << "bug: inputs/text_file.cpp opens a FIFO and blocks for a writer forever "
                  "(e.g. check --smi FIFO hangs)";
  const fs::path fifo = scratch() / "pipe";
  fs::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const auto r = run_isolated([&] { read_text_file(fifo); }, 5);
  fs::remove(fifo);
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
