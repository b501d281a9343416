// Byte sources on a recorded snapshot: the same bytes whether the file is plain, gzip or zstd
// (recognised by magic, never by name), read or borrowed chunk by chunk, from a file or from
// memory; an uncompressed file read from an offset.
#include "snapshot/byte_source.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "util/error.h"

namespace fragscope::snapshot {
namespace {

namespace fs = std::filesystem;

std::vector<std::uint8_t> read_all(ByteSource& source) {
  std::vector<std::uint8_t> out;
  std::vector<std::uint8_t> buffer(100'003);  // not a power of two: chunks end anywhere
  while (const std::size_t n = source.read(buffer)) out.insert(out.end(), buffer.begin(), buffer.begin() + n);
  return out;
}

std::vector<std::uint8_t> borrow_all(ByteSource& source) {
  std::vector<std::uint8_t> out;
  for (auto chunk = source.next_chunk(); !chunk.empty(); chunk = source.next_chunk())
    out.insert(out.end(), chunk.begin(), chunk.end());
  return out;
}

std::vector<std::uint8_t> file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

/// midrun_default's snapshot as stored (zstd), and the same pickle plain and gzipped.
struct Copies {
  fs::path zstd = fs::path(FRAGSCOPE_FIXTURES_DIR) / "midrun_default" / "snapshot.pickle.zst";
  fs::path plain = fs::path(::testing::TempDir()) / "byte_source_plain";
  fs::path gzip = fs::path(::testing::TempDir()) / "byte_source_gzip";  // no .gz: found by magic
  std::vector<std::uint8_t> pickle;
  Copies() {
    std::uint64_t size = 0;
    pickle = read_all(*open_file_source(zstd.string(), &size));
    EXPECT_EQ(size, fs::file_size(zstd));
    std::ofstream(plain, std::ios::binary)
        .write(reinterpret_cast<const char*>(pickle.data()), static_cast<std::streamsize>(pickle.size()));
    EXPECT_EQ(std::system(("gzip -c " + plain.string() + " > " + gzip.string()).c_str()), 0);
  }
};

TEST(ByteSource, EveryCompressionReadsToTheSamePickle) {
  const Copies c;
  ASSERT_GT(c.pickle.size(), 1u << 20);
  EXPECT_EQ(c.pickle[0], 0x80);  // PROTO: a pickle
  for (const fs::path& path : {c.zstd, c.plain, c.gzip}) {
    SCOPED_TRACE(path.string());
    EXPECT_EQ(read_all(*open_file_source(path.string(), nullptr)), c.pickle);
    EXPECT_EQ(borrow_all(*open_file_source(path.string(), nullptr)), c.pickle);
    const auto stored = file_bytes(path);
    EXPECT_EQ(read_all(*open_memory_source(stored, "memory")), c.pickle);
    EXPECT_EQ(borrow_all(*open_memory_source(stored, "memory")), c.pickle);
  }
}

TEST(ByteSource, CompressionIsKnownByItsMagic) {
  const Copies c;
  EXPECT_EQ(detect_compression(file_bytes(c.zstd)), Compression::kZstd);
  EXPECT_EQ(detect_compression(file_bytes(c.gzip)), Compression::kGzip);
  EXPECT_EQ(detect_compression(c.pickle), Compression::kNone);
  EXPECT_EQ(detect_compression({}), Compression::kNone);
}

TEST(ByteSource, APlainFileFromAnOffset) {
  const Copies c;
  for (const std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{c.pickle.size() / 3}}) {
    const std::vector<std::uint8_t> tail(c.pickle.begin() + static_cast<std::ptrdiff_t>(offset), c.pickle.end());
    EXPECT_EQ(read_all(*open_plain_file_at(c.plain.string(), offset)), tail) << offset;
    EXPECT_EQ(borrow_all(*open_plain_memory_at(c.pickle, offset)), tail) << offset;
  }
  try {
    open_plain_file_at(c.plain.string(), c.pickle.size() + 1);
    ADD_FAILURE() << "an offset past the end was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(c.plain.string()), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fragscope::snapshot
