// The limits of a snapshot read (read_limits.h): a small file cannot make a large model. Each
// bomb of issue 16 is written here, byte by byte or with the real compressors, and stopped with a
// one-line error; the same files read when the user vouches for them (relative limits off).
#include "snapshot/read_limits.h"

#include <unistd.h>

#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "snapshot/snapshot_reader.h"
#include "util/error.h"

namespace fragscope::snapshot {
namespace {

using namespace std::string_literals;  // "..."s keeps embedded NUL bytes

std::vector<std::uint8_t> bytes(const std::string& text) { return {text.begin(), text.end()}; }

std::string error_of(const std::function<void()>& read) {
  try {
    read();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "read without error";
  return "";
}

/// SHORT_BINUNICODE, memoized.
std::string str(std::string_view text) { return "\x8c"s + static_cast<char>(text.size()) + std::string(text) + "\x94"; }
/// LONG_BINGET.
std::string get(std::uint32_t index) {
  std::string out = "j";
  for (int i = 0; i < 4; ++i) out += static_cast<char>(index >> (8 * i));
  return out;
}

/// {'segments': [], 'device_traces': [[entry] * refs]}: one trace entry named `refs` times,
/// five bytes each. Memo: 0 top dict, 1 'segments', 2 [], 3 'device_traces', 4 outer, 5 trace,
/// 6 the entry.
std::string reference_bomb(std::size_t refs) {
  std::string p = "\x80\x04}\x94("s + str("segments") + "]\x94" + str("device_traces") + "]\x94]\x94(";
  p += "}\x94(" + str("action") + str("alloc") + str("addr") + "J\x00\x00\x00\x40"s + str("size") + "M\x00\x02"s + "u";
  for (std::size_t i = 0; i < refs; ++i) p += get(6);
  return p + "eau.";
}

/// `segments` segments that share one list of `blocks` references to one block: each segment
/// copies every block of the list into the model. Memo: 0 top dict, 1 'segments', 2 the block,
/// 3-5 its keys and state, 6 the shared list, 7 the segment list, 8-10 the segments' keys.
std::string segment_bomb(std::size_t segments, std::size_t blocks) {
  std::string p = "\x80\x04}\x94("s + str("segments");
  p += "}\x94(" + str("size") + "M\x00\x02"s + str("state") + str("active_allocated") + "u0";  // made, then popped
  p += "]\x94(";
  for (std::size_t i = 0; i < blocks; ++i) p += get(2);
  p += "e0]\x94(";  // the shared list stays in the memo only; the segment list begins
  for (std::size_t s = 0; s < segments; ++s) {
    p += "}(";
    p += (s == 0 ? str("address") : get(8)) + "J" + std::string(4, static_cast<char>(s + 1));
    p += (s == 0 ? str("total_size") : get(9)) + "J\x00\x00\x00\x40"s;
    p += (s == 0 ? str("blocks") : get(10)) + get(6) + "u";
  }
  return p + "eu.";
}

std::vector<std::uint8_t> zstd(const std::string& data, int level = 3) {
  std::vector<std::uint8_t> out(ZSTD_compressBound(data.size()));
  out.resize(ZSTD_compress(out.data(), out.size(), data.data(), data.size(), level));
  return out;
}

std::vector<std::uint8_t> gzip(const std::string& data) {
  z_stream s{};
  deflateInit2(&s, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::vector<std::uint8_t> out(deflateBound(&s, data.size()));
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  s.avail_in = static_cast<uInt>(data.size());
  s.next_out = out.data();
  s.avail_out = static_cast<uInt>(out.size());
  deflate(&s, Z_FINISH);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

const ReadLimits kTrusted{std::uint64_t{2} << 30, false};

TEST(ReadLimits, AllowedGrowsWithTheBytesReadUpToTheCeiling) {
  const ReadLimits limits{std::uint64_t{1} << 30};
  EXPECT_EQ(limits.allowed(0), kMemoryFloor);
  EXPECT_EQ(limits.allowed(100 << 20), kMemoryPerPickleByte * (100 << 20) + kMemoryFloor);
  EXPECT_EQ(limits.allowed(std::uint64_t{1} << 40), std::uint64_t{1} << 30);
  EXPECT_EQ(ReadLimits({std::uint64_t{1} << 30, false}).allowed(0), std::uint64_t{1} << 30);
}

// Issue 16: a 3 KB .zst whose trace names one entry 2^24 times grew analyze to 1.0 GB. Plain,
// the same references stop at the model budget; compressed, at the decompression ratio first.
TEST(ReadLimits, AReferenceBombStopsAtTheModelBudget) {
  const std::string pickle = reference_bomb(1 << 20);  // 5 MiB: a million copies of 48 bytes
  const std::string what = error_of([&] { parse_snapshot(bytes(pickle), "refs.pickle"); });
  EXPECT_TRUE(what.starts_with("refs.pickle: reading needs more than ")) << what;
  EXPECT_NE(what.find(" of pickle read, more than 2 times that plus 32.00 MiB: a model far larger than its file "
                      "(hostile or corrupt snapshot; --max-memory SIZE reads a file you trust within SIZE)"),
            std::string::npos) << what;
  // Vouched for, the same file reads: every reference is an event.
  const Snapshot s = parse_snapshot(bytes(pickle), "refs.pickle", {}, kTrusted);
  ASSERT_EQ(s.device_traces.size(), 1u);
  EXPECT_EQ(s.device_traces[0].size(), (1u << 20) + 1);
}

TEST(ReadLimits, ASegmentListSharedByEverySegmentStopsAtTheModelBudget) {
  const std::string pickle = segment_bomb(1000, 20000);  // 130 KB: 2*10^7 blocks, 800 MB of model
  ASSERT_LT(pickle.size(), 140000u);
  const std::string what = error_of([&] { parse_snapshot(bytes(pickle), "segments.pickle"); });
  EXPECT_TRUE(what.starts_with("segments.pickle: reading needs more than ")) << what;
  const Snapshot s = parse_snapshot(bytes(segment_bomb(3, 20000)), "segments.pickle");  // a few: fine
  EXPECT_EQ(s.blocks.size(), 60000u);
}

TEST(ReadLimits, ACeilingHoldsWhateverTheFileSize) {
  const std::string pickle = reference_bomb(1 << 18);
  const std::string what =
      error_of([&] { parse_snapshot(bytes(pickle), "refs.pickle", {}, ReadLimits{std::uint64_t{4} << 20, false}); });
  EXPECT_TRUE(what.starts_with("refs.pickle: reading needs more than 4.00 MiB of memory, the most a read may use "
                               "(--max-memory SIZE raises it)")) << what;
}

// Issue 16: 384 KB of zstd unpacked to a 4 GiB stream (25 s of CPU). The stream stops at 64 times
// what was read plus 16 MiB; every recording of the repository needs at most 46 times plus 16 MiB.
TEST(ReadLimits, ADecompressionBombStopsAtTheRatio) {
  std::string stream = "\x80\x04"s;
  stream.reserve(64 << 20);
  while (stream.size() < (64 << 20)) stream += "N0";  // valid opcodes, never a STOP
  for (const auto& [name, compressed] :
       {std::pair{"ops.pickle.zst", zstd(stream)}, std::pair{"ops.pickle.gz", gzip(stream)}}) {
    ASSERT_LT(compressed.size(), stream.size() / 200) << name;
    const auto started = std::chrono::steady_clock::now();
    const std::string what = error_of([&] { parse_snapshot(compressed, name); });
    EXPECT_TRUE(what.starts_with(std::string(name) + ": decompresses to more than 64 times its size plus 16.00 MiB ("))
        << what;
    EXPECT_NE(what.find("a decompression bomb, not a snapshot"), std::string::npos) << what;
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2)) << name;
    // Vouched for, it is read to its end (and is no snapshot).
    EXPECT_NE(error_of([&] { parse_snapshot(compressed, name, {}, kTrusted); }).find("input ends before STOP"),
              std::string::npos);
  }
}

// Issue 16: six 250 MiB strings in 48 KB reached 2.0 GB.
TEST(ReadLimits, StringsFromNothingStopAtTheRatio) {
  std::string stream = "\x80\x04]"s;
  for (char c = 'a'; c < 'c'; ++c) {
    const std::uint64_t n = 16 << 20;
    stream += "\x8e"s;
    for (int i = 0; i < 8; ++i) stream += static_cast<char>(n >> (8 * i));
    stream += std::string(n, c) + "a";
  }
  const auto compressed = zstd(stream + ".");
  const std::string what = error_of([&] { parse_snapshot(compressed, "strings.pickle.zst"); });
  EXPECT_TRUE(what.starts_with("strings.pickle.zst: decompresses to more than 64 times its size")) << what;
}

TEST(ReadLimits, RealSnapshotsReadWithinTheLimits) {
  // The largest recording: 110 MB of pickle, 0.5 bytes of model per byte.
  const Snapshot s = read_snapshot_file(std::string(FRAGSCOPE_FIXTURES_DIR) + "/big/snapshot.pickle.zst");
  EXPECT_FALSE(s.device_traces.empty());
}

// The field recordings of third-party jobs (tests/data/field) compress far more than the fixtures:
// a short trace is mostly its repeated stacks. cmp_edge is 75 times smaller under gzip -9 and 187
// under zstd --ultra -22, seg_edge (24.6 MB of pickle) needs 46 times plus 16 MiB at -22; the
// first limit of 48 times refused cmp_edge gzipped. They are stored at zstd -19: every one reads
// as stored, the two extremes more than 100 times smaller.
TEST(ReadLimits, FieldRecordingsReadAsStored) {
  const std::filesystem::path field = std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "tests/data/field";
  std::size_t read = 0;
  for (const auto& run : std::filesystem::directory_iterator(field)) {
    for (const char* name : {"oom_snapshot.pickle.zst", "snapshot.pickle.zst"}) {
      if (!std::filesystem::exists(run.path() / name)) continue;
      EXPECT_NO_THROW(read_snapshot_file((run.path() / name).string())) << run.path();
      ++read;
    }
  }
  EXPECT_GE(read, 15u);
  for (const char* run : {"cmp_edge", "seg_edge"}) {
    const std::filesystem::path path = field / run / "oom_snapshot.pickle.zst";
    std::ifstream in(path, std::ios::binary);
    const std::vector<std::uint8_t> packed{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const unsigned long long pickle_size = ZSTD_getFrameContentSize(packed.data(), packed.size());
    ASSERT_NE(pickle_size, ZSTD_CONTENTSIZE_UNKNOWN) << run;
    ASSERT_NE(pickle_size, ZSTD_CONTENTSIZE_ERROR) << run;
    EXPECT_GT(pickle_size / packed.size(), 100u) << run;  // past the 48 times of the first limit
    EXPECT_NO_THROW(parse_snapshot(packed, run)) << run;
  }
}

TEST(ReadLimits, SpecialFilesGetOneLineAndPipesAreRead) {
  EXPECT_EQ(error_of([] { read_snapshot_file("/dev/zero"); }),
            "/dev/zero: cannot read: is a character device, not a file");
  // A pipe (`fragscope analyze <(zstd -dc x.zst)` names /dev/fd/63) is streamed once, like the file it carries.
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  const std::string source = std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/snapshots/small_snapshot.pickle";
  std::thread writer([&] {
    std::ifstream in(source, std::ios::binary);
    const std::string data((std::istreambuf_iterator<char>(in)), {});
    for (std::size_t at = 0; at < data.size();) {
      const ssize_t n = ::write(ends[1], data.data() + at, data.size() - at);
      if (n <= 0) break;
      at += static_cast<std::size_t>(n);
    }
    ::close(ends[1]);
  });
  const Snapshot piped = read_snapshot_file("/proc/self/fd/" + std::to_string(ends[0]));
  writer.join();
  ::close(ends[0]);
  EXPECT_EQ(piped.segments.size(), read_snapshot_file(source).segments.size());
}

}  // namespace
}  // namespace fragscope::snapshot
