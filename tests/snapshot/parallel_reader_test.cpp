// The reader in parts against the one-thread reader, its oracle: on every recorded snapshot of
// the repository and the fixtures, and on corrupted and truncated copies, reading in 2 to 13
// parts gives the same model (every field, every id) or the same error.
#include "snapshot/parallel_reader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "../chunked_source.h"
#include "../read_outcome.h"
#include "snapshot/byte_source.h"
#include "snapshot/snapshot_reader.h"
#include "snapshot/stream_reader.h"
#include "util/error.h"

namespace fragscope::snapshot {
namespace {

std::vector<std::uint8_t> decompressed(const std::string& path) {
  auto source = open_file_source(path, nullptr);
  std::vector<std::uint8_t> out;
  for (auto chunk = source->next_chunk(); !chunk.empty(); chunk = source->next_chunk())
    out.insert(out.end(), chunk.begin(), chunk.end());
  return out;
}

/// Every snapshot recorded for the repository: the fixtures, the held-out test recordings and the
/// field recordings (third-party jobs; torch.compile's frames carry line 2^64 - 1).
std::vector<std::string> recorded_snapshots() {
  std::vector<std::string> paths;
  for (const std::string& root :
       {std::string(FRAGSCOPE_FIXTURES_DIR), std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/heldout",
        std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/field"}) {
    if (!std::filesystem::is_directory(root)) continue;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root))
      if (entry.path().filename().string().find(".pickle") != std::string::npos) paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

/// The model, or the error, as comparable text: every field and id.
std::string outcome(const std::function<Snapshot()>& read) {
  Snapshot s;
  try {
    s = read();
  } catch (const InputError& e) {
    return std::string("error: ") + e.what();
  }
  std::string out = "format " + std::to_string(static_cast<int>(s.format)) + "\n";
  auto add = [&out](auto... values) {
    ((out += std::to_string(values) + " "), ...);
    out += "\n";
  };
  for (const Segment& g : s.segments)
    add(g.device, g.address, g.total_size, g.allocated_size, g.active_size, g.requested_size, g.stream,
        static_cast<int>(g.pool), g.pool_id.first, g.pool_id.second, g.is_expandable, g.stack, g.first_block,
        g.block_count);
  for (const Block& b : s.blocks) add(b.address, b.size, b.requested_size, static_cast<int>(b.state), b.stack);
  for (const auto& trace : s.device_traces) {
    add(trace.size());
    for (const TraceEvent& e : trace)
      add(e.addr, e.size, e.stream, e.time_us, e.stack, e.user_metadata, static_cast<int>(e.action), e.action_name);
  }
  const AllocatorSettings& a = s.allocator_settings;
  out += a.alloc_conf + "\n";
  add(a.present, a.max_split_size, a.garbage_collection_threshold, a.expandable_segments, a.release_lock_on_cudamalloc);
  for (const auto& [key, value] : a.other) out += key + "=" + value + "\n";
  for (const Annotation& n : s.annotations) {
    add(n.device, n.time_us);
    for (const auto& [key, value] : n.fields) add(key, value);
  }
  for (std::size_t i = 0; i < s.strings.size(); ++i)
    out += std::string(s.strings.view(static_cast<StringId>(i))) + "\n";
  for (std::size_t i = 0; i < s.stacks.frame_count(); ++i) {
    const Frame& f = s.stacks.frame(static_cast<FrameId>(i));
    add(f.filename, f.name, f.line);
  }
  for (std::size_t i = 0; i < s.stacks.stack_count(); ++i)
    for (const FrameId f : s.stacks.stack(static_cast<StackId>(i))) add(i, f);
  return out;
}

std::string read_whole(std::span<const std::uint8_t> bytes, const ReadLimits& limits = {}) {
  return outcome([&] {
    auto source = open_memory_source(bytes, "snapshot");
    return read_snapshot(*source, "snapshot", bytes.size(), {}, limits);
  });
}

/// Read in `parts` parts; the sources hand out chunks of `chunk` bytes (0: all at once).
std::string read_parted(std::span<const std::uint8_t> bytes, unsigned parts, std::size_t chunk = 0,
                        PartsTaken* taken = nullptr, const ReadLimits& limits = {}) {
  const OpenSourceAt open_at = [&](std::uint64_t offset) -> std::unique_ptr<ByteSource> {
    const auto rest = bytes.subspan(std::min<std::uint64_t>(offset, bytes.size()));
    if (chunk == 0) return open_plain_memory_at(bytes, offset);
    return std::make_unique<ChunkedSource>(rest, std::vector<std::size_t>{chunk, chunk / 3 + 1});
  };
  const ReadAt read_at = [&](std::uint64_t offset, std::span<std::uint8_t> out) -> std::size_t {
    if (offset >= bytes.size()) return 0;
    const std::size_t n = std::min<std::uint64_t>(out.size(), bytes.size() - offset);
    std::memcpy(out.data(), bytes.data() + offset, n);
    return n;
  };
  return outcome(
      [&] { return read_snapshot_in_parts(open_at, read_at, "snapshot", bytes.size(), {}, parts, taken, limits); });
}

/// Writes snapshot-shaped pickles the way CPython's pickler does (protocol 4: MEMOIZE after
/// every new str and container, BINGET for one already written, MARK/APPENDS in batches of
/// 1000, FRAMEs), with small frames so that a small pickle has many regions.
class PickleWriter {
 public:
  /// A new str, memoized; or the memo reference of an earlier one with the same `key`.
  void str(const std::string& text, const std::string& key = "") {
    const std::string k = key.empty() ? text : key;
    if (const auto it = memo_of_.find(k); it != memo_of_.end()) return get(it->second);
    op(0x8c);
    bytes(static_cast<std::uint8_t>(text.size()));
    body_.insert(body_.end(), text.begin(), text.end());
    memo_of_[k] = memoize();
  }
  void fresh_str(const std::string& text) {  // a new object each time ('N/A' in every entry)
    op(0x8c);
    bytes(static_cast<std::uint8_t>(text.size()));
    body_.insert(body_.end(), text.begin(), text.end());
    memoize();
  }
  void integer(std::uint64_t v) {
    op(0x8a);  // LONG1, 8 bytes
    bytes(8);
    for (int i = 0; i < 8; ++i) bytes(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  /// 2^64 - 1 as CPython writes it (LONG1 of 9 bytes): torch.compile's unknown lines.
  void max_unsigned() {
    op(0x8a);
    bytes(9);
    for (int i = 0; i < 8; ++i) bytes(0xff);
    bytes(0);
  }
  void get(std::uint64_t index) {
    if (index < 256) {
      op('h');
      bytes(static_cast<std::uint8_t>(index));
    } else {
      op('j');
      for (int i = 0; i < 4; ++i) bytes(static_cast<std::uint8_t>(index >> (8 * i)));
    }
  }
  /// EMPTY_DICT MEMOIZE MARK: returns the dict's memo index; then keys and values, then end_dict.
  std::uint64_t begin_dict() {
    op('}');
    const std::uint64_t index = memoize();
    op('(');
    return index;
  }
  void end_dict() { op('u'); }
  /// A list of `n` items, each written by item(i), in batches as the pickler writes them.
  std::uint64_t list(std::size_t n, const std::function<void(std::size_t)>& item) {
    op(']');
    const std::uint64_t index = memoize();
    for (std::size_t first = 0; first < n; first += 1000) {
      const std::size_t count = std::min<std::size_t>(1000, n - first);
      if (count > 1) op('(');
      for (std::size_t i = first; i < first + count; ++i) item(i);
      op(count > 1 ? 'e' : 'a');
    }
    return index;
  }
  std::vector<std::uint8_t> finish(std::size_t frame_size) {
    op('.');
    std::vector<std::uint8_t> out = {0x80, 0x04};
    std::size_t begin = 0;
    for (std::size_t i = 0; i < starts_.size(); ++i) {
      const std::size_t end = i + 1 < starts_.size() ? starts_[i + 1] : body_.size();
      if (end - begin < frame_size && i + 1 < starts_.size()) continue;
      out.push_back(0x95);
      for (int b = 0; b < 8; ++b) out.push_back(static_cast<std::uint8_t>((end - begin) >> (8 * b)));
      out.insert(out.end(), body_.begin() + static_cast<std::ptrdiff_t>(begin),
                 body_.begin() + static_cast<std::ptrdiff_t>(end));
      begin = end;
    }
    return out;
  }

 private:
  void op(std::uint8_t code) {
    starts_.push_back(body_.size());
    body_.push_back(code);
  }
  void bytes(std::uint8_t b) { body_.push_back(b); }
  std::uint64_t memoize() {
    op(0x94);
    return memo_++;
  }
  std::vector<std::uint8_t> body_;
  std::vector<std::size_t> starts_;  // where each opcode begins: frames end there
  std::uint64_t memo_ = 0;
  std::map<std::string, std::uint64_t> memo_of_;
};

/// A snapshot whose trace refers back across any cut: shared frames, frames lists and actions,
/// unknown actions, metadata strings, entries listed twice, a second device, annotations.
std::vector<std::uint8_t> generated_snapshot(unsigned seed, std::size_t entries) {
  std::uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
  auto next = [&state](std::uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  PickleWriter w;
  std::vector<std::uint64_t> frame_memo, frames_list_memo, entry_memo;
  auto frame = [&](std::size_t f) {
    if (f < frame_memo.size()) return w.get(frame_memo[f]);
    frame_memo.push_back(w.begin_dict());
    w.str("filename");
    w.str("/src/model_" + std::to_string(f % 5) + ".py");
    w.str("line");
    if (f % 7 == 3) {
      w.max_unsigned();
    } else {
      w.integer(10 + f);
    }
    w.str("name");
    w.str("forward_" + std::to_string(f));
    w.end_dict();
  };
  auto frames = [&] {
    const std::uint64_t kind = next(6);
    if (kind == 0 && !frames_list_memo.empty()) return w.get(frames_list_memo[next(frames_list_memo.size())]);
    const std::size_t depth = kind == 1 ? 0 : 1 + next(4);
    const std::size_t base = next(frame_memo.size() + 3);
    frames_list_memo.push_back(w.list(depth, [&](std::size_t i) { frame(std::min(base + i, frame_memo.size())); }));
  };
  const char* actions[] = {"alloc", "free_requested", "free_completed", "segment_alloc", "oom", "snapshot_weird"};
  w.begin_dict();
  w.str("segments");
  w.list(2, [&](std::size_t s) {
    w.begin_dict();
    w.str("device"), w.integer(0), w.str("address"), w.integer(0x7f0000000000 + s * (1 << 24));
    w.str("total_size"), w.integer(1 << 22), w.str("stream"), w.integer(0);
    w.str("segment_type"), w.str("large"), w.str("frames"), frames();
    w.str("blocks");
    w.list(2, [&](std::size_t) {
      w.begin_dict();
      w.str("size"), w.integer(1 << 21), w.str("requested_size"), w.integer(1000 + next(1000));
      w.str("state"), w.fresh_str(next(2) ? "active_allocated" : "inactive"), w.str("frames"), frames();
      w.end_dict();
    });
    w.end_dict();
  });
  w.str("device_traces");
  w.list(2, [&](std::size_t device) {
    w.list(device == 0 ? entries : entries / 10, [&](std::size_t i) {
      if (i > 10 && next(50) == 0) return w.get(entry_memo[next(entry_memo.size())]);  // listed twice
      entry_memo.push_back(w.begin_dict());
      w.str("action"), w.str(actions[next(next(40) == 0 ? 6 : 4)]);
      w.str("addr"), w.integer(0x7f0000000000 + next(1 << 20) * 512), w.str("size"), w.integer(512 * next(4096));
      w.str("stream"), w.integer(0), w.str("time_us"), w.integer(1'700'000'000'000'000 + i);
      w.str("frames"), frames();
      w.str("compile_context"), w.fresh_str("N/A");
      w.str("user_metadata");
      if (next(20) == 0) w.str("step " + std::to_string(next(5)));
      else w.str("");
      w.end_dict();
    });
  });
  w.str("allocator_settings");
  w.begin_dict();
  w.str("PYTORCH_CUDA_ALLOC_CONF"), w.str("expandable_segments:False"), w.str("max_split_size"), w.integer(1 << 30);
  w.end_dict();
  w.str("external_annotations");
  w.list(3, [&](std::size_t i) {
    w.begin_dict();
    w.str("device"), w.integer(0), w.str("stage"), w.str("START"), w.str("name"), w.str("step " + std::to_string(i));
    w.str("entry"), w.get(entry_memo[i * 7 % entry_memo.size()]);
    w.end_dict();
  });
  w.end_dict();
  return w.finish(2048);
}

TEST(ParallelReader, GeneratedSnapshotsThatReferBackAcrossEveryCutReadTheSame) {
  std::size_t taken = 0, planned = 0;
  for (unsigned seed = 1; seed <= 12; ++seed) {
    const auto bytes = generated_snapshot(seed, 4000);
    const std::string whole = read_whole(bytes);
    ASSERT_TRUE(whole.starts_with("format")) << "seed " << seed << ": " << whole.substr(0, 300);
    for (const unsigned parts : {2u, 3u, 6u, 11u}) {
      PartsTaken t;
      EXPECT_EQ(read_parted(bytes, parts, seed % 3 == 0 ? 97 : 0, &t), whole)
          << "seed " << seed << ", " << parts << " parts";
      taken += t.taken;
      planned += t.parts;
    }
  }
  EXPECT_GT(taken, planned / 2);  // most parts are taken over: the references back are resolved
}

/// An error without the byte it names: a memory limit is checked where counts reach a
/// checkpoint, which parts taken over reach elsewhere than one thread.
std::string without_offset(const std::string& outcome) { return outcome.substr(0, outcome.rfind(" (at byte")); }

// Issue 16: both readers hold the memory limits. A trace that names its entries again and again
// stops at the budget in parts as in one thread.
TEST(ParallelReader, TheModelBudgetHoldsInParts) {
  PickleWriter w;
  std::vector<std::uint64_t> entries;
  w.begin_dict();
  w.str("segments");
  w.list(0, [](std::size_t) {});
  w.str("device_traces");
  w.list(1, [&](std::size_t) {
    w.list(1'300'000, [&](std::size_t i) {
      if (i >= 20000) return w.get(entries[i % entries.size()]);  // 5 bytes, 48 of model
      entries.push_back(w.begin_dict());
      w.str("action"), w.str("alloc"), w.str("addr"), w.integer(0x7f0000000000 + i * 512);
      w.end_dict();
    });
  });
  w.end_dict();
  const auto bytes = w.finish(2048);
  const std::string whole = read_whole(bytes);
  ASSERT_TRUE(whole.starts_with("error: snapshot: reading needs more than ")) << whole.substr(0, 300);
  for (const unsigned parts : {2u, 4u, 7u}) EXPECT_EQ(without_offset(read_parted(bytes, parts)), without_offset(whole));
  const ReadLimits trusted{std::uint64_t{1} << 30, false};
  EXPECT_EQ(read_parted(bytes, 4, 0, nullptr, trusted), read_whole(bytes, trusted));
}

// Parts share the ceiling: a part over its share is read by the main machine instead. Under any
// ceiling, reading in parts gives the model or the ceiling's error, nothing else; parts hold
// their own tables, so near the ceiling the two readers may land on either side of it.
TEST(ParallelReader, ACeilingHoldsInParts) {
  const auto bytes = generated_snapshot(3, 20000);
  const std::string model = read_whole(bytes);
  ASSERT_TRUE(model.starts_with("format")) << model.substr(0, 300);
  const std::string ceiling = "error: snapshot: reading needs more than ";
  std::size_t modelled = 0, refused = 0;
  for (const std::uint64_t kib : {512u, 1024u, 2048u, 4096u, 8192u, 65536u}) {
    const ReadLimits limits{kib << 10, false};
    for (const std::string& outcome : {read_whole(bytes, limits), read_parted(bytes, 6, 0, nullptr, limits)}) {
      if (outcome == model) ++modelled;
      else if (outcome.starts_with(ceiling) && outcome.find("the most a read may use") != std::string::npos) ++refused;
      else ADD_FAILURE() << kib << " KiB: " << outcome.substr(0, 300);
    }
  }
  EXPECT_GE(modelled, 2u);
  EXPECT_GE(refused, 2u);
}

TEST(ParallelReader, EveryRecordedSnapshotReadsTheSameInAnyNumberOfParts) {
  const auto paths = recorded_snapshots();
  ASSERT_GE(paths.size(), 25u) << "fixtures or test recordings missing";
  std::size_t parts_taken = 0;
  for (const std::string& path : paths) {
    const auto bytes = decompressed(path);
    const std::string whole = read_whole(bytes);
    ASSERT_TRUE(whole.starts_with("format")) << path << ": " << whole.substr(0, 200);
    for (const unsigned parts : {2u, 3u, 8u, 13u}) {
      PartsTaken taken;
      EXPECT_EQ(read_parted(bytes, parts, 0, &taken), whole) << path << " in " << parts << " parts";
      parts_taken += taken.taken;
      EXPECT_LE(taken.taken, taken.parts);
    }
  }
  // The parts are really parsed apart and taken over, not all read again in line.
  EXPECT_GT(parts_taken, paths.size() * 10);
}

TEST(ParallelReader, PartsReadInSmallChunksAreTakenOverAlike) {
  const auto bytes = decompressed(std::string(FRAGSCOPE_FIXTURES_DIR) + "/frag_oom_104/snapshot.pickle.zst");
  const std::string whole = read_whole(bytes);
  for (const std::size_t chunk : {7u, 61u, 4096u}) {
    PartsTaken taken;
    EXPECT_EQ(read_parted(bytes, 5, chunk, &taken), whole) << "chunks of " << chunk;
    EXPECT_EQ(taken.taken, taken.parts) << "chunks of " << chunk;
    EXPECT_EQ(taken.parts, 4u);
  }
}

// Truncated and corrupted copies: the parts that meet the damage are dropped and read in line,
// so the error (or the model) is the one-thread reader's, to the byte offset.
TEST(ParallelReader, DamageAnywhereGivesTheOneThreadOutcome) {
  const auto bytes = decompressed(std::string(FRAGSCOPE_FIXTURES_DIR) + "/frag_oom_104/snapshot.pickle.zst");
  ASSERT_GT(bytes.size(), 500'000u);
  std::size_t errors = 0;
  for (std::size_t i = 1; i < 40; ++i) {
    const std::size_t at = bytes.size() * i / 40 + i * 7919 % 1000;
    std::vector<std::uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(at));
    const std::string cut_whole = read_whole(cut);
    EXPECT_EQ(read_parted(cut, 5), cut_whole) << "cut at " << at;
    for (const std::uint8_t poison :
         {std::uint8_t{'c'}, std::uint8_t{'q'}, std::uint8_t{0xff}, std::uint8_t{'e'}, std::uint8_t{0x94}}) {
      std::vector<std::uint8_t> bad = bytes;
      bad[at] = poison;
      const std::string bad_whole = read_whole(bad);
      errors += bad_whole.starts_with("error");
      EXPECT_EQ(read_parted(bad, 5), bad_whole) << "byte " << at << " made " << int{poison};
    }
  }
  EXPECT_GT(errors, 100u);  // most damage is found, by both
}

// Inputs the fuzz target found: the parts' entries pushed, then taken by an opcode other than
// APPENDS (here DICT counts them); and every seed of the fuzz target.
TEST(ParallelReader, FuzzFindingsAndSeedsReadTheSame) {
  std::vector<std::string> paths = {std::string(FRAGSCOPE_SOURCE_DIR) +
                                    "/tests/data/snapshots/parted_dict_over_pushed_entries.pickle"};
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(FRAGSCOPE_SOURCE_DIR) + "/fuzz/seeds/snapshot_reader"))
    paths.push_back(entry.path().string());
  for (const std::string& path : paths) {
    std::vector<std::uint8_t> bytes;
    try {
      bytes = decompressed(path);
    } catch (const InputError&) {
      continue;  // a seed for the decompressors
    }
    const std::string whole = read_whole(bytes);
    for (unsigned parts = 2; parts <= 7; ++parts)
      EXPECT_EQ(without_memory_held(read_parted(bytes, parts)), without_memory_held(whole))
          << path << " in " << parts << " parts";
  }
}

TEST(ParallelReader, AnUnframedPickleIsReadInOnePart) {
  // Protocol 2 has no FRAME: nothing to cut at.
  const std::vector<std::uint8_t> bytes = {0x80, 0x02, '}', 'q', 0x00, '(', 'X', 8, 0, 0, 0, 's', 'e', 'g', 'm', 'e',
                                           'n', 't', 's', ']', 'q', 0x01, 'u', '.'};
  PartsTaken taken;
  EXPECT_EQ(read_parted(bytes, 4, 0, &taken), read_whole(bytes));
  EXPECT_EQ(taken.parts, 0u);
}

}  // namespace
}  // namespace fragscope::snapshot
