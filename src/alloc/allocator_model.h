#pragma once
/// @file allocator_model.h
/// @brief The one interface every allocator model implements, so a replay can drive PyTorch's
/// caching allocator, its expandable-segment variant or the ideal packer alike.
///
/// A model sees what the real allocator sees: malloc(size, stream), free(block), and for
/// blocks used on other streams (record_stream) a free that completes later. It keeps the
/// statistics of `torch.cuda.memory_stats()` that a replay compares with the real run.
/// Thread-safety: none; a model is driven by one thread (run several models in parallel).

#include <cstdint>
#include <vector>

namespace fragscope::alloc {

using StreamId = std::uint16_t;    ///< dense stream number (0 = the legacy default stream)
/// Dense memory-pool number: 0 = the device's default pools; others are private pools (a CUDA
/// graph's pool, torch.compile's reduce-overhead, torch.cuda.MemPool), numbered by the caller.
using MemPoolId = std::uint16_t;
inline constexpr MemPoolId kDefaultPool = 0;
using BlockHandle = std::uint32_t;  ///< names a live block inside one model
inline constexpr BlockHandle kNoBlock = 0xffffffffu;

/// @brief What the allocator asked of the driver (the trace's segment_* actions).
enum class SegmentAction : std::uint8_t { kAlloc, kFree, kMap, kUnmap };

struct SegmentEvent {
  SegmentAction action = SegmentAction::kAlloc;
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  friend bool operator==(const SegmentEvent&, const SegmentEvent&) = default;
};

/// @brief The subset of `torch.cuda.memory_stats()` (aggregate pool) a model maintains.
struct AllocatorStats {
  std::uint64_t reserved_bytes = 0;       ///< cudaMalloc'd + mapped bytes
  std::uint64_t peak_reserved_bytes = 0;  ///< max_memory_reserved()
  std::uint64_t allocated_bytes = 0;      ///< Σ size of allocated blocks (rounded)
  std::uint64_t peak_allocated_bytes = 0; ///< max_memory_allocated()
  std::uint64_t requested_bytes = 0;      ///< Σ requested size of active blocks
  std::uint64_t segments = 0;             ///< live cudaMalloc segments (expandable maps excluded)
  std::uint64_t num_alloc_retries = 0;    ///< mallocs that flushed the cache and retried
  std::uint64_t num_ooms = 0;
  std::uint64_t num_device_alloc = 0;     ///< cudaMalloc + map calls
  std::uint64_t num_device_free = 0;      ///< cudaFree + unmap calls
  std::uint64_t num_sync_all_streams = 0;
};

/// @brief One block that exists when a replay starts (the trace began mid-run).
struct InitialBlock {
  std::uint64_t address = 0;
  std::uint64_t size = 0;            ///< the block's real (rounded, maybe unsplit) size
  std::uint64_t requested_size = 0;
  bool pending_free = false;         ///< freed, waiting on stream events
};

/// @brief One segment (or one mapped run of an expandable segment) that exists at the start.
struct InitialSegment {
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  StreamId stream = 0;
  MemPoolId mem_pool = kDefaultPool;
  bool small_pool = false;
  bool expandable = false;
  std::vector<InitialBlock> live_blocks;  ///< in address order; the rest of the segment is free
};

class AllocatorModel {
 public:
  virtual ~AllocatorModel() = default;

  /// @brief malloc(size, stream) with `size` as the caller asked (unrounded), served from
  /// `pool` (a private pool: while a CUDA graph captures, or under torch.cuda.use_mem_pool).
  /// @return the new block, or kNoBlock when the device is out of memory (counted in num_ooms;
  ///         the model's state is then as PyTorch leaves it after an OOM).
  virtual BlockHandle malloc(std::uint64_t size, StreamId stream, MemPoolId pool) = 0;
  /// @brief malloc from the default pools.
  BlockHandle malloc(std::uint64_t size, StreamId stream) { return malloc(size, stream, kDefaultPool); }
  /// @brief free() of a block not used on other streams: back to the cache at once.
  virtual void free(BlockHandle block) = 0;
  /// @brief free() of a block used on other streams: it waits for their events.
  virtual void free_requested(BlockHandle block) = 0;
  /// @brief The events of a free_requested() block completed: back to the cache.
  virtual void free_completed(BlockHandle block) = 0;

  /// @brief torch.cuda.empty_cache(): gives every releasable cached segment of the default
  /// pools back (private pools stay while their graph or MemPool lives).
  virtual void empty_cache() {}

  /// @brief Starts from a mid-run state instead of an empty device.
  /// REQUIRES: nothing allocated yet. @return one handle per live block, in input order
  /// (kNoBlock for a block a model counts as freed already: the ideal packer's pending frees).
  virtual std::vector<BlockHandle> restore(const std::vector<InitialSegment>& segments) = 0;

  virtual const AllocatorStats& stats() const = 0;
  /// @brief An upper bound of the heap memory the model has held at its peak (its arrays as
  /// they grow, its indexes), so that replays run at once can stay within a memory budget.
  virtual std::uint64_t memory_bytes() const = 0;
  /// @brief The address a live block got.
  virtual std::uint64_t address(BlockHandle block) const = 0;
  /// @brief Where segment events go (nullptr = nowhere). The log must outlive the model's use.
  void set_segment_log(std::vector<SegmentEvent>* log) { segment_log_ = log; }

 protected:
  void log_segment(SegmentAction action, std::uint64_t address, std::uint64_t size) {
    if (segment_log_) segment_log_->push_back({action, address, size});
  }

 private:
  std::vector<SegmentEvent>* segment_log_ = nullptr;
};

}  // namespace fragscope::alloc
