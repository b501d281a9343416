#pragma once
/// @file snapshot.h
/// @brief The data model of `torch.cuda.memory._snapshot()`: segments, blocks, per-device traces,
/// allocator settings and annotations, with interned strings and stacks.
///
/// Invariants established by the reader (snapshot_reader.h):
/// - `segments` keep the snapshot's order (address-sorted per device); each owns the contiguous
///   range `blocks[first_block, first_block + block_count)`, in address order.
/// - Block addresses are filled in (segment address + sizes of the blocks before it) when the
///   snapshot omits them.
/// - `device_traces[d]` is oldest → newest, exactly as recorded; indexes into it are the
///   `index` values of truth.json (`oom_event.index`).
/// Thread-safety: immutable after reading; share freely between threads.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "snapshot/stack_table.h"
#include "snapshot/string_table.h"
#include "snapshot/trace_action.h"
#include "util/huge_pages.h"

namespace fragscope::snapshot {

enum class BlockState : std::uint8_t {
  kActiveAllocated,   ///< handed out to a tensor
  kActivePendingFree, ///< freed, waiting on events of streams that used it (record_stream)
  kInactive,          ///< free, cached by the allocator
};

struct Block {
  std::uint64_t address = 0;
  std::uint64_t size = 0;            ///< rounded size the allocator handed out
  std::uint64_t requested_size = 0;  ///< what the caller asked for (stale for inactive blocks)
  BlockState state = BlockState::kInactive;
  StackId stack = 0;  ///< frames at allocation (0 = none recorded)
};

enum class PoolKind : std::uint8_t { kSmall, kLarge };

struct Segment {
  int device = 0;
  std::uint64_t address = 0;
  std::uint64_t total_size = 0;
  std::uint64_t allocated_size = 0;
  std::uint64_t active_size = 0;
  std::uint64_t requested_size = 0;
  std::uint64_t stream = 0;  ///< cudaStream_t as an integer; 0 = legacy default stream
  PoolKind pool = PoolKind::kLarge;
  std::pair<std::int64_t, std::int64_t> pool_id{0, 0};  ///< (0,0) = default pool
  bool is_expandable = false;  ///< one mapped run of an expandable segment
  StackId stack = 0;           ///< frames at cudaMalloc / first map
  std::uint32_t first_block = 0;
  std::uint32_t block_count = 0;
};

/// @brief One trace ring-buffer entry.
struct TraceEvent {
  std::uint64_t addr = 0;  ///< block/segment address; for kOom: the driver's free bytes (device_free)
  std::uint64_t size = 0;
  std::uint64_t stream = 0;
  std::int64_t time_us = 0;  ///< µs since the epoch (0 when not recorded)
  StackId stack = 0;
  StringId user_metadata = 0;  ///< annotation text attached by the user (0 = none)
  TraceAction action = TraceAction::kOther;
  StringId action_name = 0;  ///< only for kOther: the unknown action's spelling
};

/// @brief `allocator_settings` (absent in older snapshots: `present` is false).
struct AllocatorSettings {
  bool present = false;
  std::string alloc_conf;               ///< raw PYTORCH_CUDA_ALLOC_CONF
  std::int64_t max_split_size = -1;     ///< bytes; -1 = unlimited
  double garbage_collection_threshold = 0.0;
  bool expandable_segments = false;
  bool release_lock_on_cudamalloc = false;
  /// Divisions per power-of-two interval, index k = [2^k MiB, 2^(k+1) MiB); all 0 = disabled.
  std::array<std::int64_t, 16> roundup_power2_divisions{};
  std::map<std::string, std::string> other;  ///< keys this version does not interpret, as text
};

/// @brief What an annotation marks: a record_function range opening ("START") or closing ("END").
enum class AnnotationStage : std::uint8_t { kOther, kStart, kEnd };

/// @brief One `external_annotations` entry (e.g. record_function START/END). `stage` and `name`
/// are decoded from `fields` once, when the snapshot is read (decode_annotation).
struct Annotation {
  int device = 0;
  AnnotationStage stage = AnnotationStage::kOther;  ///< its "stage" field
  std::int64_t time_us = 0;
  StringId name = 0;                                  ///< its "name" field ("" when it has none)
  std::vector<std::pair<StringId, StringId>> fields;  ///< every other key → value as text
};

/// @brief Sets a.stage and a.name from a.fields (the last "stage" and "name" keys).
void decode_annotation(Annotation& a, const StringTable& strings);

/// @brief A device's trace. Huge pages: it is the largest array of a snapshot, written once.
using TraceEventList = std::vector<TraceEvent, HugePageAllocator<TraceEvent>>;

enum class SnapshotFormat : std::uint8_t {
  kDict,                ///< modern: {segments, device_traces, allocator_settings, ...}
  kLegacySegmentList,   ///< old memory_snapshot(): a bare list of segments, no trace
};

struct Snapshot {
  SnapshotFormat format = SnapshotFormat::kDict;
  std::vector<Segment> segments;
  std::vector<Block> blocks;
  std::vector<TraceEventList> device_traces;  ///< indexed by device ordinal
  AllocatorSettings allocator_settings;
  std::vector<Annotation> annotations;
  StringTable strings;
  StackTable stacks;

  /// @brief Blocks of `segment`, in address order.
  std::span<const Block> blocks_of(const Segment& segment) const {
    return {blocks.data() + segment.first_block, segment.block_count};
  }
  /// @brief The trace of `device`, or an empty one when the snapshot has none for it.
  std::span<const TraceEvent> trace(int device) const;
  /// @brief The name of an event's action ("alloc", ..., or the unknown action's own spelling).
  std::string_view action_name(const TraceEvent& event) const;
};

/// @brief The device with the most trace events (0 when there is no trace at all).
int busiest_device(const Snapshot& snapshot);

/// @brief The device whose segments reserve the most bytes (the busiest device when there are
/// no segments): on a multi-GPU node every rank but 0 dumps its memory on device 1 or above.
int device_holding_memory(const Snapshot& snapshot);

/// @brief Index of the last `oom` entry in `device`'s trace, or nullopt when it has none.
std::optional<std::size_t> last_oom_index(const Snapshot& snapshot, int device);

}  // namespace fragscope::snapshot
