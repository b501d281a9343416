// The snapshot reader on real recorded files: every protocol and compression gives the same
// model; legacy layouts; shared stacks stay shared; file errors name the file.
#include "snapshot/snapshot_reader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "../chunked_source.h"
#include "metrics/memory_totals.h"
#include "snapshot/byte_source.h"
#include "snapshot/stream_reader.h"
#include "util/error.h"

namespace fragscope::snapshot {
namespace {

const std::string kFixture = std::string(FRAGSCOPE_FIXTURES_DIR) + "/frag_oom_104/snapshot.pickle.zst";
const std::string kData = std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/snapshots/";

void expect_same_model(const Snapshot& a, const Snapshot& b) {
  ASSERT_EQ(a.segments.size(), b.segments.size());
  ASSERT_EQ(a.blocks.size(), b.blocks.size());
  for (std::size_t i = 0; i < a.blocks.size(); ++i) {
    EXPECT_EQ(a.blocks[i].address, b.blocks[i].address);
    EXPECT_EQ(a.blocks[i].size, b.blocks[i].size);
    EXPECT_EQ(a.blocks[i].state, b.blocks[i].state);
  }
  ASSERT_EQ(a.device_traces.size(), b.device_traces.size());
  for (std::size_t d = 0; d < a.device_traces.size(); ++d) {
    ASSERT_EQ(a.device_traces[d].size(), b.device_traces[d].size());
    for (std::size_t i = 0; i < a.device_traces[d].size(); ++i) {
      const auto& x = a.device_traces[d][i];
      const auto& y = b.device_traces[d][i];
      EXPECT_EQ(x.action, y.action);
      EXPECT_EQ(x.addr, y.addr);
      EXPECT_EQ(x.size, y.size);
      EXPECT_EQ(x.time_us, y.time_us);
      EXPECT_EQ(a.stacks.stack(x.stack).size(), b.stacks.stack(y.stack).size());
    }
  }
}

std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

/// The decompressed pickle of `path`.
std::vector<std::uint8_t> pickle_bytes(const std::string& path) {
  const auto compressed = read_bytes(path);
  auto source = open_memory_source(compressed, path);
  std::vector<std::uint8_t> out;
  std::vector<std::uint8_t> buffer(1 << 16);
  while (const std::size_t n = source->read(buffer)) out.insert(out.end(), buffer.begin(), buffer.begin() + n);
  return out;
}

TEST(SnapshotReader, ChunkBoundariesAnywhereGiveTheSameModel) {
  const auto bytes = pickle_bytes(kFixture);
  const Snapshot reference = read_snapshot_file(kFixture);
  for (const std::vector<std::size_t>& sizes : std::vector<std::vector<std::size_t>>{
           {1}, {2, 3}, {7, 1, 15}, {16}, {17, 64, 1}, {4095, 3}, {100000}}) {
    SCOPED_TRACE(testing::PrintToString(sizes));
    ChunkedSource source(bytes, sizes);
    expect_same_model(reference, read_snapshot(source, "chunked.pickle"));
  }
}

std::string error_of(const std::function<void()>& read) {
  try {
    read();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SnapshotReader, TruncationAcrossChunksIsTheSameError) {
  // Same message, same byte offset, wherever the chunk boundaries fall.
  const auto bytes = read_bytes(kData + "small_snapshot.pickle");
  for (std::size_t cut = 0; cut < bytes.size(); cut += 7) {
    const auto head = std::span<const std::uint8_t>(bytes).first(cut);
    const std::string whole = error_of([&] { parse_snapshot(head, "cut.pickle"); });
    ChunkedSource source(head, {5, 1, 9});
    EXPECT_EQ(error_of([&] { read_snapshot(source, "cut.pickle"); }), whole) << "cut at " << cut;
    EXPECT_NE(whole, "(no error)");
  }
}

TEST(SnapshotReader, PlainFileGivesTheSameModelAsItsZstd) {
  // Read ahead in 1 MiB chunks handed to the parser: take a file spanning a dozen.
  const std::string zst = std::string(FRAGSCOPE_FIXTURES_DIR) + "/midrun_default/snapshot.pickle.zst";
  const auto bytes = pickle_bytes(zst);
  ASSERT_GT(bytes.size(), std::size_t{10} << 20);
  const auto plain = std::filesystem::path(::testing::TempDir()) / "midrun_default.pickle";
  std::ofstream(plain, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                               static_cast<std::streamsize>(bytes.size()));
  expect_same_model(read_snapshot_file(zst), read_snapshot_file(plain.string()));
}

TEST(SnapshotReader, ReadsTheRecordedSnapshot) {
  const Snapshot s = read_snapshot_file(kFixture);
  EXPECT_EQ(s.format, SnapshotFormat::kDict);
  EXPECT_EQ(s.segments.size(), 524u);
  EXPECT_EQ(s.blocks.size(), 716u);
  ASSERT_EQ(s.device_traces.size(), 1u);
  ASSERT_EQ(s.device_traces[0].size(), 10370u);
  const TraceEvent& first = s.device_traces[0][0];
  EXPECT_EQ(first.action, TraceAction::kSegmentAlloc);
  EXPECT_EQ(first.addr, 139693744193536u);
  EXPECT_EQ(first.size, 262144000u);
  EXPECT_EQ(first.time_us, 1795948474301963);
  ASSERT_EQ(s.stacks.stack(first.stack).size(), 8u);
  const Frame& top = s.stacks.frame(s.stacks.stack(first.stack)[0]);
  EXPECT_EQ(s.strings.view(top.name), "__torch_function__");
  EXPECT_EQ(top.line, 116);
  const TraceEvent& oom = s.device_traces[0][9359];
  EXPECT_EQ(oom.action, TraceAction::kOom);
  EXPECT_EQ(oom.addr, 1066532864u);  // device_free
  EXPECT_EQ(oom.size, 1654784000u);
  EXPECT_TRUE(s.allocator_settings.present);
  EXPECT_EQ(s.allocator_settings.max_split_size, -1);
  EXPECT_FALSE(s.allocator_settings.expandable_segments);
  EXPECT_EQ(s.allocator_settings.alloc_conf, "");
  // The first segment as pickle.load shows it.
  EXPECT_EQ(s.segments[0].address, 139640291983360u);
  EXPECT_EQ(s.segments[0].total_size, 828375040u);
  EXPECT_EQ(s.segments[0].pool, PoolKind::kLarge);
  EXPECT_EQ(s.blocks[0].requested_size, 827392000u);
}

TEST(SnapshotReader, SharedStacksAreStoredOnce) {
  const Snapshot s = read_snapshot_file(kFixture);
  std::size_t events_with_frames = 0;
  for (const auto& e : s.device_traces[0]) events_with_frames += e.stack != 0;
  // PyTorch pickles identical stacks once and refers to them by memo; the model keeps them
  // shared, so there are far fewer stacks than events carrying one.
  EXPECT_GT(events_with_frames, 5000u);
  EXPECT_LT(s.stacks.stack_count(), events_with_frames / 4);
}

TEST(SnapshotReader, CompiledFramesWithLine2To64Minus1HaveAnUnknownLine) {
  // Entries of a torch.compile recording (PyTorch 2.11): fake_tensor.py's init_gpu_context frame
  // carries line 2^64 - 1, a 9-byte LONG1.
  const Snapshot s = read_snapshot_file(kData + "compiled_unknown_line.pickle");
  ASSERT_EQ(s.device_traces.size(), 1u);
  ASSERT_EQ(s.device_traces[0].size(), 10u);
  std::size_t unknown = 0;
  for (std::size_t i = 0; i < s.stacks.frame_count(); ++i) {
    const Frame& f = s.stacks.frame(static_cast<FrameId>(i));
    if (f.line != Frame::kUnknownLine) continue;
    ++unknown;
    EXPECT_EQ(s.strings.view(f.name), "init_gpu_context");
  }
  EXPECT_EQ(unknown, 1u);
  EXPECT_EQ(s.device_traces[0][3].action, TraceAction::kFreeRequested);
}

TEST(SnapshotReader, EveryProtocolAndCompressionGivesTheSameModel) {
  const Snapshot reference = read_snapshot_file(kFixture);
  for (const char* name : {"frag_oom_104.proto2.pickle.gz", "frag_oom_104.proto3.pickle.gz",
                           "frag_oom_104.proto5.pickle.gz"}) {
    SCOPED_TRACE(name);
    expect_same_model(reference, read_snapshot_file(kData + name));
  }
}

TEST(SnapshotReader, RecognisesCompressionByContentNotName) {
  const auto copy = std::filesystem::path(::testing::TempDir()) / "snapshot_without_extension";
  std::filesystem::copy_file(kData + "frag_oom_104.proto5.pickle.gz", copy,
                             std::filesystem::copy_options::overwrite_existing);
  const Snapshot s = read_snapshot_file(copy.string());
  EXPECT_EQ(s.segments.size(), 524u);
}

// A device list may list the same entry objects as another (a hostile or hand-made file): the
// events of the first list were moved out from under the second, which read freed memory.
TEST(SnapshotReader, DeviceListsSharingEntriesEachGetTheirEvents) {
  const Snapshot s = read_snapshot_file(std::string(FRAGSCOPE_SOURCE_DIR) +
                                        "/fuzz/seeds/snapshot_reader/framed_small_frames.pickle");
  ASSERT_EQ(s.device_traces.size(), 2u);
  ASSERT_EQ(s.device_traces[0].size(), 260u);
  ASSERT_EQ(s.device_traces[1].size(), 3u);  // the first three entries again
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(s.device_traces[1][i].addr, s.device_traces[0][i].addr);
    EXPECT_EQ(s.device_traces[1][i].time_us, s.device_traces[0][i].time_us);
    EXPECT_EQ(s.device_traces[1][i].action, s.device_traces[0][i].action);
  }
}

TEST(SnapshotReader, ReadsLegacySegmentListWithHistory) {
  const Snapshot s = read_snapshot_file(kData + "legacy_segments.pickle.gz");
  EXPECT_EQ(s.format, SnapshotFormat::kLegacySegmentList);
  EXPECT_EQ(s.segments.size(), 50u);
  EXPECT_EQ(s.blocks.size(), 92u);
  EXPECT_TRUE(s.device_traces.empty());
  const auto totals = metrics::compute_totals(s);
  EXPECT_EQ(totals.reserved_bytes, 4810866688u);
  EXPECT_EQ(totals.allocated_bytes, 1858076672u);
  EXPECT_EQ(totals.requested_bytes, 1858076672u);  // from history[-1].real_size
  // Addresses absent in legacy blocks are derived from the segment address.
  const Segment& seg = s.segments[0];
  std::uint64_t expected = seg.address;
  for (const Block& b : s.blocks_of(seg)) {
    EXPECT_EQ(b.address, expected);
    expected += b.size;
  }
}

// Issue 16: a device of 2^32 + 1 was cut to 32 bits (device 1) before the range check.
TEST(SnapshotReader, DeviceIsCheckedBeforeItIsNarrowed) {
  try {
    read_snapshot_file(kData + "device_past_32_bits.pickle");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("segment: device 4294967297 out of range"), std::string::npos) << e.what();
  }
}

TEST(SnapshotReader, MissingFileNamesThePath) {
  try {
    read_snapshot_file("/nonexistent/rank3.pickle");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/rank3.pickle: cannot open: No such file or directory");
  }
}

TEST(SnapshotReader, DirectoryIsRejectedWithItsName) {
  const std::string dir = ::testing::TempDir();
  try {
    read_snapshot_file(dir);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), dir + ": cannot read: is a directory");
  }
}

}  // namespace
}  // namespace fragscope::snapshot
