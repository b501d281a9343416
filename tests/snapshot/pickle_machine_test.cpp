// Hostile, corrupt and truncated pickles: each gets a clear InputError, never a crash, a hang,
// unbounded memory or executed code.
#include "snapshot/pickle_machine.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <iterator>

#include "../chunked_source.h"
#include "snapshot/byte_source.h"
#include "snapshot/read_limits.h"
#include "snapshot/snapshot_reader.h"
#include "snapshot/stream_reader.h"
#include "util/error.h"

namespace fragscope::snapshot {
namespace {

std::vector<std::uint8_t> bytes(std::string_view text) { return {text.begin(), text.end()}; }

std::vector<std::uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

/// Parses `data` and returns the error message (fails the test when it parses).
std::string error_of(const std::vector<std::uint8_t>& data) {
  try {
    parse_snapshot(data, "hostile.pickle");
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "parsed without error";
  return "";
}

using namespace std::string_literals;  // "..."s keeps embedded NUL bytes

const std::string kProto4 = "\x80\x04";

TEST(PickleMachine, ReadsAMinimalSnapshot) {
  // {'segments': []}
  const auto s = parse_snapshot(bytes(kProto4 + "}\x8c\x08segments]s."), "minimal.pickle");
  EXPECT_TRUE(s.segments.empty());
  EXPECT_TRUE(s.device_traces.empty());
}

TEST(PickleMachine, RefusesEveryOpcodeThatRunsCode) {
  struct Case {
    std::string pickle;
    std::string message;
  };
  const Case cases[] = {
      {"cos\nsystem\n", "refusing to load: pickle opcode GLOBAL would import code"},
      {"\x8c\x02os\x8c\x06system\x93", "refusing to load: pickle opcode STACK_GLOBAL would import code"},
      {"N)R", "refusing to load: pickle opcode REDUCE would call code"},
      {"}}b", "refusing to load: pickle opcode BUILD would call code (__setstate__)"},
      {"(ios\nsystem\n", "refusing to load: pickle opcode INST would import and call code"},
      {"(No", "refusing to load: pickle opcode OBJ would call code"},
      {"N)\x81", "refusing to load: pickle opcode NEWOBJ would call code"},
      {"N)}\x92", "refusing to load: pickle opcode NEWOBJ_EX would call code"},
      {"\x82\x01", "refusing to load: pickle opcode EXT1 would import code"},
      {"\x83\x01\x00", "refusing to load: pickle opcode EXT2 would import code"},
      {"\x84\x01\x00\x00\x00", "refusing to load: pickle opcode EXT4 would import code"},
      {"P1\n", "refusing to load: pickle opcode PERSID would call a persistent-load hook"},
      {"NQ", "refusing to load: pickle opcode BINPERSID would call a persistent-load hook"},
      {"\x97", "refusing to load: pickle opcode NEXT_BUFFER needs out-of-band buffers"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.message);
    const std::string message = error_of(bytes(kProto4 + c.pickle));
    EXPECT_NE(message.find("hostile.pickle: " + c.message), std::string::npos) << message;
  }
}

TEST(PickleMachine, EveryTruncationIsAnErrorNeverACrash) {
  const auto whole = read_all(std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/snapshots/small_snapshot.pickle");
  ASSERT_GT(whole.size(), 1000u);
  EXPECT_EQ(parse_snapshot(whole, "small.pickle").segments.size(), 6u);
  for (std::size_t n = 0; n < whole.size(); ++n) {
    const std::vector<std::uint8_t> prefix(whole.begin(), whole.begin() + static_cast<long>(n));
    EXPECT_THROW(parse_snapshot(prefix, "small.pickle"), InputError) << "prefix of " << n << " bytes";
  }
}

TEST(PickleMachine, TruncationMessageNamesFileAndOffset) {
  const auto whole = read_all(std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/snapshots/small_snapshot.pickle");
  const std::vector<std::uint8_t> prefix(whole.begin(), whole.begin() + 3000);
  const std::string message = error_of(prefix);
  EXPECT_EQ(message.rfind("hostile.pickle: truncated pickle", 0), 0u) << message;
}

TEST(PickleMachine, WrongMagicIsNotAPickle) {
  EXPECT_EQ(error_of(bytes("{\"allocated_bytes.all.current\": 1}")),
            "hostile.pickle: not a pickle (starts with 0x7b; snapshots start with 0x80)");
  EXPECT_EQ(error_of(bytes("PK\x03\x04zip")),
            "hostile.pickle: not a pickle (starts with 0x50; snapshots start with 0x80)");
  EXPECT_EQ(error_of({}), "hostile.pickle: truncated pickle: input ends before STOP (at byte 0)");
}

TEST(PickleMachine, HugeLengthFieldsAreRejectedWithoutAllocating) {
  EXPECT_NE(error_of(bytes(kProto4 + "\x8d" + std::string("\x00\x00\x00\x00\x00\x00\x00\x40", 8)))
                .find("string length 4611686018427387904 exceeds the 256 MiB limit"),
            std::string::npos);
  EXPECT_NE(error_of(bytes(kProto4 + "X\xff\xff\xff\xff")).find("exceeds the 256 MiB limit"), std::string::npos);
  // LONG4 of 2 GiB with no bytes behind it: skipped in chunks, then truncated.
  EXPECT_NE(error_of(bytes(kProto4 + "\x8b\xff\xff\xff\x7f")).find("truncated pickle"), std::string::npos);
  EXPECT_NE(error_of(bytes(kProto4 + "\x8b\xff\xff\xff\xff")).find("negative LONG4 length"), std::string::npos);
}

TEST(PickleMachine, MemoIndicesOutOfRange) {
  EXPECT_NE(error_of(bytes(kProto4 + "h\x05")).find("memo index 5 out of range (memo holds 0)"), std::string::npos);
  EXPECT_NE(error_of(bytes(kProto4 + "N\x94j\x00\x00\x00\x01"s)).find("memo index 16777216 out of range"),
            std::string::npos);
  EXPECT_NE(error_of(bytes(kProto4 + "Nr\xff\xff\xff\xff")).find("memo index 4294967295 out of range"),
            std::string::npos);
  // Each LONG_BINPUT a little past the memo's end: before the bound, 4,096 of them (20 kB)
  // made the memo 2^28 entries (2 GiB). Indices never outrun the bytes read.
  std::string ladder = kProto4 + "N";
  for (std::uint32_t index = 60000; index < 60000u * 4096; index += 60000) {
    ladder += 'r';
    for (int b = 0; b < 4; ++b) ladder += static_cast<char>((index >> (8 * b)) & 0xff);
  }
  EXPECT_NE(error_of(bytes(ladder)).find("memo index 60000 out of range"), std::string::npos);
}

TEST(PickleMachine, DeepNestingCostsNoNativeStack) {
  constexpr std::size_t kDepth = 1'000'000;
  std::string nested = kProto4 + std::string(kDepth, ']') + std::string(kDepth - 1, 'a') + ".";
  // A million one-item lists take some 50 bytes of memory for each 2 bytes of pickle: past the
  // default budget (read_limits.h), so read as a file the user vouches for.
  EXPECT_NE(error_of(bytes(nested)).find("a model far larger than its file"), std::string::npos);
  const ReadLimits trusted{std::uint64_t{1} << 30, false};
  try {
    parse_snapshot(bytes(nested), "deep.pickle", {}, trusted);
    ADD_FAILURE() << "parsed";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("segments[0] is not a segment"), std::string::npos) << e.what();
  }
  // Deep nesting inside allocator_settings, whose unknown values are rendered as text.
  std::string settings = kProto4 + "}(\x8c\x08segments]\x8c\x12" "allocator_settings}\x8c\x01x" +
                         std::string(kDepth, ']') + std::string(kDepth - 1, 'a') + "su.";
  EXPECT_EQ(parse_snapshot(bytes(settings), "deep.pickle", {}, trusted).allocator_settings.other.at("x").substr(0, 4),
            "[[[[");
}

TEST(PickleMachine, CorruptStructureIsReported) {
  EXPECT_NE(error_of(bytes(kProto4 + "a")).find("stack underflow"), std::string::npos);
  EXPECT_NE(error_of(bytes(kProto4 + "Ne")).find("MARK expected"), std::string::npos);
  EXPECT_NE(error_of(bytes(kProto4 + "NNNs")).find("target is not a dict"), std::string::npos);
  EXPECT_NE(error_of(bytes(kProto4 + "NN.")).find("STOP with an unbalanced stack"), std::string::npos);
  EXPECT_NE(error_of(bytes(kProto4 + "\xff")).find("unknown opcode 0xff"), std::string::npos);
  EXPECT_NE(error_of(bytes("\x80\x06N.")).find("unsupported pickle protocol 6"), std::string::npos);
  EXPECT_NE(error_of(bytes(kProto4 + "I5\n.")).find("unsupported protocol-0 opcode 'I'"), std::string::npos);
}

TEST(PickleMachine, TraceEntryFieldsOfTheWrongKindOrSign) {
  // Adjacent literals end each hex escape: "\x06" "action", not "\x06action".
  const std::string entry = kProto4 + "}(\x8c\x06" "action" "\x8c\x05" "alloc" "\x8c\x04" "size";
  EXPECT_NE(
      error_of(bytes(entry + "J\xff\xff\xff\xffu."s)).find("hostile.pickle: trace entry: 'size' is negative (-1)"),
      std::string::npos);
  EXPECT_NE(error_of(bytes(entry + "\x8c\x01"
                                   "xu."))
                .find("hostile.pickle: trace entry: 'size' is a str, expected an int"),
            std::string::npos);
  const std::string frame = kProto4 + "}(\x8c\x08" "filename" "\x8c\x01" "f" "\x8c\x04" "line" "\x8c\x01" "x"
                            "\x8c\x04" "name" "\x8c\x01" "nu.";
  EXPECT_NE(error_of(bytes(frame)).find("hostile.pickle: frame: 'line' is a str, expected an int"), std::string::npos);
}

TEST(PickleMachine, PicklesThatAreNotSnapshots) {
  EXPECT_EQ(error_of(bytes(kProto4 + "K\x05.")),
            "hostile.pickle: not a memory snapshot: the top-level object is an int (at byte 5)");
  EXPECT_NE(error_of(bytes(kProto4 + "}\x8c\x01\x61K\x01s.")).find("has no 'segments'"), std::string::npos);
  // A trace entry whose action is not a string.
  EXPECT_NE(error_of(bytes(kProto4 + "}\x8c\x06\x61\x63tionK\x01s."))
                .find("trace entry: 'action' is an int, expected a str"),
            std::string::npos);
}

TEST(PickleMachine, CorruptCompressedStreams) {
  EXPECT_NE(error_of(bytes("\x28\xb5\x2f\xfdgarbage-after-magic")).find("hostile.pickle: corrupt zstd data"),
            std::string::npos);
  const auto gz = read_all(std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/snapshots/legacy_segments.pickle.gz");
  const std::vector<std::uint8_t> half(gz.begin(), gz.begin() + static_cast<long>(gz.size() / 2));
  EXPECT_NE(error_of(half).find("hostile.pickle: truncated gzip stream"), std::string::npos);
  auto flipped = gz;
  flipped[gz.size() / 2] ^= 0xff;
  EXPECT_THROW(parse_snapshot(flipped, "flipped.pickle.gz"), InputError);
}

// Found by the fuzzer: a zstd header claiming ~2^63 bytes of content made the reader reserve
// for it. The claim is now a hint bounded by the compressed size.
TEST(PickleMachine, ZstdContentSizeClaimIsBoundedByCompressedSize) {
  const auto frame = bytes("\x28\xb5\x2f\xfd\xe4\xb0\xff\xf8\x00\xe5\x0a\xb2\x03\x90\x06\x79\x2d\x3e\xbe\xc7"
                           "\x6f\x50\xa1\xd3\x90\x9e\x5a\x33\x2e\x31\xf5\xff\xff\xff\x02\x75\x40\xec\x4b"s);
  const auto source = open_memory_source(frame, "claims.pickle.zst");
  EXPECT_LE(source->expected_size(), frame.size() * kMaxDecompressionRatio + kDecompressionFloor);
  EXPECT_THROW(parse_snapshot(frame, "claims.pickle.zst"), InputError);
}

// Dict bodies (EMPTY_DICT MEMOIZE MARK ... SETITEMS) take a fast path that hands over to the
// generic loop at any opcode it does not handle. In 1-byte chunks the fast path hardly ever
// starts, so comparing the two readings checks every hand-over.

/// SHORT_BINUNICODE of `text`, memoized.
std::string str(std::string_view text) {
  return "\x8c"s + static_cast<char>(text.size()) + std::string(text) + "\x94";
}

/// A snapshot whose one trace holds `entries` (each a complete dict). A 256-byte string comes
/// first: the reader's first bytes are a short peeked chunk, where no fast path runs.
std::string trace_snapshot(const std::string& entries) {
  return kProto4 + "}(" + str("padding") + "X\x00\x01\x00\x00"s + std::string(256, '.') +
         str("segments") + "]" + str("device_traces") + "](](" + entries + "eeu.";
}

/// The outcome of reading `pickle` whole or in chunks of `chunk` bytes: error text or a digest.
std::string outcome(const std::string& pickle, std::size_t chunk) {
  const auto data = bytes(pickle);
  try {
    Snapshot s;
    if (chunk == 0) {
      s = parse_snapshot(data, "body.pickle");
    } else {
      ChunkedSource source(data, {chunk});
      s = read_snapshot(source, "body.pickle");
    }
    std::string digest;
    for (const TraceEvent& e : s.device_traces.at(0)) {
      digest += fmt::format("{}:{}:{}:{}:{} ", static_cast<int>(e.action), e.addr, e.size, e.stream,
                            s.stacks.stack(e.stack).size());
    }
    return digest;
  } catch (const InputError& e) {
    return e.what();
  }
}

TEST(PickleMachine, DictBodyFastPathHandsOverExactly) {
  const std::string frame =
      "}\x94(" + str("filename") + str("a.py") + str("line") + "K\x07" + str("name") + str("f") + "u";
  const std::string head = "}\x94(" + str("action") + str("alloc") + str("addr") + "\x8a\x06\x00\x00\x20\x00\x00\x7f"s +
                           str("size") + "J\x00\x02\x00\x00"s + str("stream") + "K\x00"s;
  // A new frame inside the frames list (the list hands over), a float and a nested dict (the
  // dict hands over), a None and a bool, then an entry that reuses the first one's frames list.
  const std::string entries =
      head + str("frames") + "]\x94(" + frame + "\x94" "e" "u" +
      head + str("extra") + "G\x3f\xf8\x00\x00\x00\x00\x00\x00"s + str("frames") + "N" + "u" +
      head + str("nested") + "}" + str("flag") + "\x88" + "u" +
      head + str("frames") + "h\x0a" + "u";  // memo 10: the first entry's frames list
  const std::string pickle = trace_snapshot(entries);
  const std::string whole = outcome(pickle, 0);
  EXPECT_EQ(whole, "0:139637978824704:512:0:1 0:139637978824704:512:0:0 0:139637978824704:512:0:0 "
                   "0:139637978824704:512:0:1 ");
  for (const std::size_t chunk : {1, 2, 5, 16, 17, 40}) {
    SCOPED_TRACE(chunk);
    EXPECT_EQ(outcome(pickle, chunk), whole);
  }
}

// Entries usually repeat the previous entry's keys in order (the reader then compares keys
// instead of looking each up); any other order, a repeated key or an extra key must read the
// same as the first time. Half the entries of a training step have an empty frames list.
TEST(PickleMachine, EntriesReadAlikeWhateverTheirKeyOrder) {
  auto entry = [](const std::string& items) { return "}\x94(" + items + "u"; };
  const std::string action = str("action") + str("alloc"), empty_frames = str("frames") + "]\x94";
  const std::string entries =
      entry(action + str("size") + "K\x01" + str("note") + "N" + empty_frames) +  // a key not read
      entry(action + str("size") + "K\x02" + str("note") + "K\x05" + empty_frames) +  // same keys
      entry(str("size") + "K\x03" + action + empty_frames) +                   // reordered
      entry(action + str("size") + "K\x04" + str("size") + "K\x05" + empty_frames) +  // repeated: last wins
      entry(action + str("size") + "K\x06" + str("stream") + "K\x07" + empty_frames) +  // one more
      entry(action + str("size") + "K\x08" + empty_frames);
  const std::string pickle = trace_snapshot(entries);
  EXPECT_EQ(outcome(pickle, 0), "0:0:1:0:0 0:0:2:0:0 0:0:3:0:0 0:0:5:0:0 0:0:6:7:0 0:0:8:0:0 ");
  for (const std::size_t chunk : {1, 3, 16, 29}) {
    SCOPED_TRACE(chunk);
    EXPECT_EQ(outcome(pickle, chunk), outcome(pickle, 0));
  }
  // Only the first key differs, and it was 'action': the second dict is no trace entry.
  const std::string no_action = trace_snapshot(entry(action + str("size") + "K\x01" + empty_frames) +
                                               entry(str("note") + str("x") + str("size") + "K\x02" + empty_frames));
  EXPECT_NE(outcome(no_action, 0).find("device_traces[0][1] is not a trace entry (no 'action')"), std::string::npos)
      << outcome(no_action, 0);
}

// A snapshot may write a fresh frames list for every entry; lists of the same frames in the
// same order are one stack, others are not.
TEST(PickleMachine, FreshFrameListsOfTheSameFramesAreOneStack) {
  auto frame = [](std::string_view name) {
    return "}\x94(" + str("filename") + str("a.py") + str("line") + "K\x07" + str("name") + str(name) + "u";
  };
  const std::string head = "}\x94(" + str("action") + str("alloc") + str("size") + "K\x01";
  // Entry 1 creates frames f (memo 9) and g (memo 15); later entries list them afresh.
  const std::string f = "h\x09", g = "h\x0f";
  const std::string entries = head + str("frames") + "]\x94(" + frame("f") + frame("g") + "eu" +
                              head + str("frames") + "]\x94(" + f + g + "eu" +
                              head + str("frames") + "]\x94(" + g + f + "eu" +
                              head + str("frames") + "]\x94(" + f + g + "eu" +
                              head + str("frames") + "]\x94(" + f + "eu";
  const auto data = bytes(trace_snapshot(entries));
  const Snapshot s = parse_snapshot(data, "frames.pickle");
  const auto& trace = s.device_traces.at(0);
  ASSERT_EQ(trace.size(), 5u);
  EXPECT_EQ(trace[1].stack, trace[0].stack);
  EXPECT_EQ(trace[3].stack, trace[0].stack);
  EXPECT_NE(trace[2].stack, trace[0].stack);
  EXPECT_NE(trace[4].stack, trace[0].stack);
  const auto first = s.stacks.stack(trace[0].stack);
  const auto swapped = s.stacks.stack(trace[2].stack);
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(swapped.size(), 2u);
  EXPECT_EQ(first[0], swapped[1]);
  EXPECT_EQ(first[1], swapped[0]);
  EXPECT_EQ(s.stacks.stack(trace[4].stack).size(), 1u);
  for (const std::size_t chunk : {1, 7}) {
    SCOPED_TRACE(chunk);
    EXPECT_EQ(outcome(trace_snapshot(entries), chunk), outcome(trace_snapshot(entries), 0));
  }
}

TEST(PickleMachine, ErrorsInsideADictBodyMatchTheGenericReader) {
  const std::string head = "}\x94(" + str("action") + str("alloc") + str("size") + "K\x01";
  const std::string padding(24, 'N');  // enough bytes behind for the fast path to run
  struct Case {
    std::string body;
    std::string message;
  };
  const Case cases[] = {
      {head + "cos\nsystem\n" + padding, "refusing to load: pickle opcode GLOBAL would import code"},
      {head + str("addr") + "h\xc8" + padding, "memo index 200 out of range"},
      {head + str("addr") + "j\x00\x00\x00\x10"s + padding, "memo index 268435456 out of range"},
      {"}\x94(\x94" + padding, "stack underflow"},
      {head + str("addr") + "u" + padding, "SETITEMS with an odd number of values"},
      {head + str("addr") + "]\x94(h\xc8" + padding, "memo index 200 out of range"},
      {head + str("addr") + "J\xff\xff\xff\xffu"s + padding, "trace entry: 'addr' is negative (-1)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    const std::string pickle = trace_snapshot(c.body);
    const std::string whole = outcome(pickle, 0);
    EXPECT_NE(whole.find(c.message), std::string::npos) << whole;
    EXPECT_EQ(outcome(pickle, 1), whole);
  }
}

/// {'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 0, 'size': 512, 'stream': <stream>,
///   'frames': [{'filename': 'f.py', 'line': <line>, 'name': 'n'}]}]]}, ints as pickled bytes.
std::vector<std::uint8_t> one_event(const std::string& stream, const std::string& line) {
  const std::string head =
      "}(\x8c\x08"
      "segments]\x8c\x0d"
      "device_traces]]}(\x8c\x06"
      "action\x8c\x05"
      "alloc\x8c\x04"
      "addrK\x00"
      "\x8c\x04"
      "sizeM\x00\x02\x8c\x06"
      "stream"s;
  const std::string frame = "\x8c\x06" "frames]}(\x8c\x08" "filename\x8c\x04" "f.py\x8c\x04" "line"s;
  return bytes(kProto4 + head + stream + frame + line + "\x8c\x04" "name\x8c\x01" "nuauaau."s);
}

TEST(PickleMachine, NineByteIntegersAreUnsignedDataWiderOnesStillRefused) {
  const std::string small = "K\x07";
  const std::string max_u64 = "\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00"s;  // 2^64 - 1, as CPython writes it
  const std::string two_63 = "\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00"s;  // 2^63
  Snapshot s = parse_snapshot(one_event(small, small), "ok.pickle");
  EXPECT_EQ(s.stacks.frame(s.stacks.stack(s.device_traces[0][0].stack)[0]).line, 7);

  // torch.compile's C++ frames: line 2^64 - 1 means no line.
  s = parse_snapshot(one_event(small, max_u64), "compiled.pickle");
  const Frame& frame = s.stacks.frame(s.stacks.stack(s.device_traces[0][0].stack)[0]);
  EXPECT_EQ(frame.line, Frame::kUnknownLine);
  EXPECT_EQ(frame.line_text(), "?");
  // A cudaStream_t written unsigned.
  s = parse_snapshot(one_event(two_63, small), "stream.pickle");
  EXPECT_EQ(s.device_traces[0][0].stream, std::uint64_t{1} << 63);
  s = parse_snapshot(one_event(max_u64, small), "stream.pickle");
  EXPECT_EQ(s.device_traces[0][0].stream, ~std::uint64_t{0});

  // Beyond 64 bits (10 bytes, or 9 that are negative) nothing PyTorch writes: still an error.
  EXPECT_NE(error_of(one_event(small, "\x8a\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00"s))
                .find("frame: 'line' is an int wider than 64 bits, expected an int"),
            std::string::npos);
  EXPECT_NE(error_of(one_event(small, "\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\xff"s)).find("wider than 64 bits"),
            std::string::npos);
  // A LONG4 announcing 2 GiB in a line: skipped in bounded chunks, then truncated; never buffered.
  EXPECT_NE(error_of(one_event(small, "\x8b\xff\xff\xff\x7f")).find("truncated pickle"), std::string::npos);
}

}  // namespace
}  // namespace fragscope::snapshot
