#pragma once
/// @file prepared_trace.h
/// @brief One device's trace, compiled once into a compact list of allocator operations that
/// any number of models can replay (in parallel: a PreparedTrace is immutable).
///
/// Compiling does what does not depend on the allocator config:
/// - pairs events: `free_requested` immediately followed by `free_completed` of the same address
///   is one plain free; a `free_requested` alone is a free that waits on stream events
///   (record_stream) and its later `free_completed` completes it, at the trace's moment;
/// - names live blocks by dense slots (reused after a free), so a replay needs no address hash
///   and its memory grows with the live blocks, not with the trace;
/// - attaches to each malloc the segment events the real allocator logged inside it (for the
///   self-check and as the addresses the real driver returned);
/// - reconstructs the allocator state at the first event when the ring buffer started mid-run
///   (initial_state.h), and walks the recorded reserved-bytes curve;
/// - collects what the trace says about the device's capacity: the `oom` entries' free bytes
///   and the release bursts of failed cudaMallocs;
/// - tells cache flushes from a malloc's own releases (release_origin.h: by the releases' stacks,
///   else a release followed by anything but a cudaMalloc/map or an OOM is a flush), and OOMs the
///   run died of from OOMs it survived (snapshot/survived_oom.h: ATen catches them, or an `alloc` or another
///   `oom` follows them);
/// - gives each malloc the memory pool that served it (mem_pools.h: CUDA graphs' private pools), and marks the
///   mallocs ATen would survive refused (Op::elastic).

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "alloc/alloc_config.h"
#include "alloc/allocator_model.h"
#include "alloc/device_memory.h"
#include "snapshot/snapshot.h"
#include "snapshot/survived_oom.h"

namespace fragscope::replay {

enum class OpKind : std::uint8_t {
  kAlloc,          ///< malloc(size, stream) → slot
  kFree,           ///< free of slot (free_requested + free_completed at once)
  kFreeRequested,  ///< free of slot that waits on other streams' events
  kFreeCompleted,  ///< those events completed
  kOom,            ///< the real malloc(size = rounded size, stream) failed here, and the run died of it
  kCaughtOom,      ///< the same, but the caller caught the OutOfMemoryError and the run went on
  kEmptyCache,     ///< segments released outside any malloc: an emptyCache() call
};

/// @brief One operation. 32 bytes; the replay loop streams through an array of these.
struct Op {
  std::uint64_t size = 0;           ///< kAlloc: requested bytes; kOom: rounded bytes
  std::uint32_t slot = 0;           ///< live-block slot (kAlloc/kFree*)
  std::uint32_t trace_index = 0;    ///< index of the event in device_traces[device]
  std::uint32_t segment_end = 0;    ///< this op's segment events end here (see segment_events)
  std::uint32_t hint_end = 0;       ///< this op's address hints end here (see address_hints)
  alloc::StreamId stream = 0;
  OpKind kind = OpKind::kAlloc;
  /// kAlloc inside an ATen function whose caller catches its OOM (snapshot/survived_oom.h): a cuDNN plan's
  /// workspace, which a plan with less workspace replaces when it is refused (ReplayOptions::elastic).
  bool elastic = false;
  alloc::MemPoolId pool = alloc::kDefaultPool;  ///< kAlloc/kOom/kCaughtOom: the pool asked (mem_pools.h)
};
static_assert(sizeof(Op) == 32);

/// @brief A recorded `oom` entry.
struct RecordedOom {
  std::uint32_t trace_index = 0;
  std::uint64_t size = 0;              ///< rounded request
  std::uint64_t device_free = 0;       ///< cudaMemGetInfo free bytes at the OOM
  std::uint64_t reserved_at_oom = 0;   ///< recorded reserved bytes at that moment
  bool caught = false;                 ///< the run went on from it (snapshot/survived_oom.h)
};

/// @brief A stretch of the trace over which one capacity explains every cudaMalloc/map the
/// driver served or refused. Non-PyTorch memory that moves (cuDNN/cuBLAS workspaces, NCCL
/// buffers, lazily loaded modules, other processes) makes several: a new stretch starts where
/// the driver serves at or above a level it refused before, or refuses at or below a level it
/// served before.
struct CapacityPiece {
  std::uint32_t first_trace_index = 0;
  std::uint64_t lower = 0;  ///< capacity ≥ this: reserved bytes held or just served
  std::uint32_t lower_trace_index = 0;
  std::optional<std::uint64_t> upper;  ///< capacity < this: bytes held + a cudaMalloc/map refused
  std::uint32_t upper_trace_index = 0;
  std::optional<std::uint64_t> driver_estimate;  ///< reserved + device_free at the stretch's first OOM
};

/// @brief What the trace tells about the device's capacity for this process.
struct CapacityEvidence {
  /// Largest reserved bytes after a successful cudaMalloc/map: capacity ≥ this.
  std::uint64_t lower_bound = 0;
  /// Smallest reserved + request of a cudaMalloc/map that failed (a release burst inside one
  /// malloc): capacity < this. nullopt when no malloc failed.
  std::optional<std::uint64_t> failed_at;
  std::uint32_t failed_at_trace_index = 0;
  std::uint32_t release_bursts = 0;  ///< failed cudaMallocs seen (each one a retry or an OOM)
  /// The stretches, in trace order (one when a constant capacity explains the trace).
  std::vector<CapacityPiece> pieces;
};

struct PreparedTrace {
  std::string source;  ///< the snapshot file, for messages
  int device = 0;
  std::size_t trace_events = 0;  ///< events in device_traces[device]
  std::vector<Op> ops;
  std::vector<alloc::SegmentEvent> segment_events;  ///< real segment events, grouped per op
  std::vector<alloc::AddressHint> address_hints;    ///< real segment_alloc/map addresses
  std::uint32_t slot_count = 0;  ///< most slots live at once (size of a replay's handle table)

  /// State at the first event; `initial_slots[i]` names the i-th live block, in the order of
  /// the segments' live_blocks.
  std::vector<alloc::InitialSegment> initial_segments;
  std::vector<std::uint32_t> initial_slots;
  bool starts_mid_run = false;  ///< the trace does not start from an empty allocator
  /// Its stacks cannot tell elastic mallocs (snapshot::hides_aten_catchers): those marked are all there may be.
  bool elastic_hidden = false;

  std::vector<std::uint64_t> streams;  ///< dense stream id → cudaStream_t value
  /// Dense memory-pool id → PyTorch's pool id ([0] = (0, 0), the default pools; others are
  /// private pools: CUDA graphs, torch.compile reduce-overhead, torch.cuda.MemPool).
  std::vector<std::pair<std::int64_t, std::int64_t>> mem_pools;
  alloc::AllocConfig recorded_config;  ///< from allocator_settings (defaults when absent)
  bool recorded_config_known = false;

  std::uint64_t recorded_initial_reserved = 0;  ///< reserved bytes at the first event
  std::uint64_t recorded_peak_reserved = 0;     ///< max of the recorded reserved curve
  std::uint64_t recorded_final_reserved = 0;
  std::vector<RecordedOom> ooms;
  std::uint32_t flushes = 0;  ///< emptyCache() calls (kEmptyCache ops)
  CapacityEvidence capacity;
  std::uint32_t anomalies = 0;  ///< events that fit no live block (e.g. a ring-buffer edge)
};

/// @brief The most CUDA streams, memory pools, and pools that allocate ((memory pool, stream)
/// pairs) a trace may name. Real traces name one to three of each (PyTorch's stream pool holds 32
/// streams per priority); each allocating pair costs every replay two free-block sets of 24 KiB
/// and, under expandable segments, two address ranges the size of the device: a few hundred bytes
/// of trace naming 60,000 streams made one replay hold 1.4 GB.
inline constexpr std::size_t kMaxTraceStreams = 1024;
inline constexpr std::size_t kMaxTraceMemPools = 1024;
inline constexpr std::size_t kMaxAllocatingPools = 256;

/// @brief Compiles `device`'s trace of `snapshot`; `end`, what the run's log says of how it ended, picks the fatal
/// OOM (snapshot::fatal_oom_index), the others becoming kCaughtOom.
/// @throws InputError naming `source` when the snapshot has no trace for `device`, names more
///         streams or pools than the limits above, or its
///         allocator_settings hold a config PyTorch would reject.
PreparedTrace prepare_trace(const snapshot::Snapshot& snapshot, int device, const std::string& source,
                            snapshot::RunEnd end = snapshot::RunEnd::kUnknown);

/// @brief For each of the trace's events, the index in `trace.ops` of the kAlloc or kOom op it
/// made, or kNoOp (frees, segment events, events the compiler dropped).
inline constexpr std::uint32_t kNoOp = std::numeric_limits<std::uint32_t>::max();
std::vector<std::uint32_t> malloc_op_of_event(const PreparedTrace& trace);

/// @brief True when a malloc of `trace` is elastic (Op::elastic).
bool has_elastic_allocs(const PreparedTrace& trace);

/// @brief The recorded OOM the run died of (the last one no caller caught), or nullptr.
const RecordedOom* fatal_oom(const PreparedTrace& trace);

}  // namespace fragscope::replay
