#pragma once
/// @file pickle_splitter.h
/// @brief Where a snapshot's pickle can be cut into parts that threads parse apart: before a
/// trace entry, with the number of memo entries made before it.
///
/// The stream is cut at FRAME opcodes (protocol 4 writes one every 64 KiB, on an opcode
/// boundary) into regions, each walked on its own thread: a walk only finds where opcodes begin
/// (about half the time of parsing them), counts MEMOIZEs and finds the region's first trace
/// entry, `EMPTY_DICT MEMOIZE MARK` then a memo reference to the key 'action'. That offset and
/// the MEMOIZEs before it (the regions' counts added up) are all a part needs to parse alone;
/// the strings memoized before the second trace entry (the keys among them) let a part read the
/// keys its entries refer to. The plan is a guide, never trusted: the taker checks every part
/// against its own parse (parallel_reader.h).
/// Thread-safety: SplitPlan's members may be called from any thread.

#include <condition_variable>
#include <functional>
#include <span>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "snapshot/byte_source.h"

namespace fragscope::snapshot {

/// @brief A part's first byte (a trace entry's EMPTY_DICT) and the memo entries made before it.
struct PartStart {
  std::uint64_t offset = 0;
  std::uint64_t memo_base = 0;
};

/// @brief A str memoized (SHORT_BINUNICODE, then MEMOIZE) early in the stream.
struct KnownString {
  std::uint64_t memo_index = 0;
  std::string text;
};

/// @brief What the walk of one region found.
struct RegionWalk {
  bool walked = false;            ///< it ended exactly at the region's end (the last: at STOP)
  std::uint64_t memoizes = 0;     ///< MEMOIZEs in the region
  std::optional<std::uint64_t> entry;  ///< offset of its first trace entry (not in region 0)
  std::uint64_t memoizes_before_entry = 0;
};

/// @brief The regions of a stream, walked on several threads, and the parts they give: part j
/// (j >= 1) starts at region j's first trace entry.
class SplitPlan {
 public:
  /// @param bounds region starts: 0, then ascending opcode boundaries (FRAME opcodes).
  explicit SplitPlan(std::vector<std::uint64_t> bounds);

  std::size_t region_count() const { return bounds_.size(); }
  std::uint64_t region_begin(std::size_t j) const { return bounds_[j]; }
  /// The region's end (~0: the stream's end).
  std::uint64_t region_end(std::size_t j) const { return j + 1 < bounds_.size() ? bounds_[j + 1] : ~std::uint64_t{0}; }

  // --- The walks ---
  void set_region(std::size_t j, RegionWalk walk);
  /// Region 0's walk: the strs memoized before the second trace entry, and the memo index of
  /// the key 'action' (none: no trace entry found).
  void set_known_strings(std::vector<KnownString> strings, std::optional<std::uint64_t> action_key);

  // --- The parts and the taker (each blocks until what it needs is walked) ---
  const std::vector<KnownString>& known_strings();
  std::optional<std::uint64_t> action_key();
  /// @brief Part j's start (1 <= j < region_count()), or none.
  std::optional<PartStart> start(std::size_t j);
  /// @brief The first part whose start is in [from, end), if any.
  std::optional<std::size_t> first_start_in(std::uint64_t from, std::uint64_t end);

 private:
  const std::vector<std::uint64_t> bounds_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::optional<RegionWalk>> walks_;
  std::vector<KnownString> known_;
  std::optional<std::uint64_t> action_key_;
  bool known_set_ = false;
};

/// @brief Region starts for `parts` parts of a `size`-byte protocol-4+ stream that `read_at`
/// reads: the first FRAME at or after each k * size / parts, found by stepping from frame to
/// frame (9 bytes read per 64 KiB frame). Fewer where the stream is not framed throughout.
std::vector<std::uint64_t> frame_bounds(
    const std::function<std::size_t(std::uint64_t, std::span<std::uint8_t>)>& read_at, std::uint64_t size,
    unsigned parts);

/// @brief Walks region `j` of the pickle that `source` yields from the region's start, and
/// sets what it found in `plan` (a region it cannot walk: walked = false). Region 0 also sets
/// the known strings. Never throws.
void walk_region(ByteSource& source, SplitPlan& plan, std::size_t j);

}  // namespace fragscope::snapshot
