#pragma once
/// @file caching_allocator.h
/// @brief A faithful model of PyTorch's native CUDA caching allocator (one device), including
/// expandable segments, following c10/cuda/CUDACachingAllocator.cpp rule for rule.
///
/// What it reproduces (see docs/replay.md for the rules with references):
/// - rounding (512 B, roundup_power2_divisions), small (≤ 1 MiB) and large pools per stream,
///   segment sizes (2 MiB, large_segment_size, 2 MiB multiples);
/// - best fit by (size, address) per (stream, pool), the split rules, max_split_size with the
///   max_non_split_rounding tolerance, merging of free neighbours;
/// - malloc's order of attempts: cached block → GC (memory fraction + threshold) → cudaMalloc →
///   free oversize cached blocks (release_available) → free every unsplit cached segment and
///   retry (release_cached, counted in num_alloc_retries) → OOM;
/// - expandable segments: one virtual range per (stream, pool), 2 MiB / large_segment_size
///   pages mapped on demand at the lowest address that fits, unmapped by the release paths;
/// - record_stream frees: a block waits (pending) until its events complete, or until a
///   release_cached synchronises all streams.
/// - private pools (a CUDA graph's pool, torch.compile reduce-overhead, torch.cuda.MemPool):
///   pools of their own per (pool, stream), served by the same rules, never released by
///   empty_cache(), a failed malloc's release or GC (their graph or MemPool holds them).
/// What it leaves out: a private pool's release once its graph is destroyed, MemPool's
/// no_split and use_on_oom options, the capture-time limits on a malloc's release path,
/// free-memory callbacks, IPC.
///
/// Invariants: blocks of one segment form an address-ordered doubly linked list; two free
/// neighbours with the same mapped state never coexist (they merge); every free mapped block is
/// in exactly one pool's `blocks` set, every unmapped one in its pool's `unmapped` set.
/// Thread-safety: none (drive one model from one thread).

#include <cstdint>
#include <optional>
#include <vector>

#include <absl/container/btree_set.h>
#include <absl/container/flat_hash_map.h>

#include "alloc/alloc_config.h"
#include "alloc/allocator_model.h"
#include "alloc/device_memory.h"
#include "alloc/free_block_set.h"
#include "alloc/size_rules.h"

namespace fragscope::alloc {

struct CachingAllocatorOptions {
  AllocConfig config;
  /// `set_per_process_memory_fraction(f)` → f × total device memory; cudaMalloc is refused
  /// above it without asking the driver, and it enables garbage_collection_threshold.
  std::optional<std::uint64_t> allowed_memory_maximum;
  /// totalGlobalMem: sizes the virtual range of an expandable segment (1⅛ × this).
  std::uint64_t device_total_memory = 0;
};

class CachingAllocator final : public AllocatorModel {
 public:
  /// @param device the simulated GPU; must outlive the model.
  CachingAllocator(const CachingAllocatorOptions& options, DeviceMemory& device);

  using AllocatorModel::malloc;
  BlockHandle malloc(std::uint64_t size, StreamId stream, MemPoolId pool) override;
  void free(BlockHandle block) override;
  void free_requested(BlockHandle block) override;
  void free_completed(BlockHandle block) override;
  /// Segments as given, except cudaMalloc segments under expandable segments, which this
  /// allocator could not hold: their live blocks are re-laid back to back in one expandable
  /// segment per (stream, pool), in the pages the segments held (caching_allocator_restore.cpp).
  std::vector<BlockHandle> restore(const std::vector<InitialSegment>& segments) override;
  const AllocatorStats& stats() const override { return stats_; }
  std::uint64_t address(BlockHandle block) const override { return blocks_[block].address; }
  std::uint64_t memory_bytes() const override;

  /// @brief Releases every unsplit cached segment of the default pools and unmaps their free
  /// pages (release_cached_blocks with no private pool freeable).
  void empty_cache() override;

  /// @brief Everything that decides how later calls are served, as words to compare
  /// (caching_allocator_state.cpp): each segment in address order with its pool (and page and
  /// range when expandable), its blocks in address order (size, allocated, mapped, pending; an
  /// allocated block's requested size and its label from `labels`, 0 when absent; a free block's
  /// age when garbage collection runs). Free lists follow from the blocks (free neighbours merge);
  /// statistics that only count or keep a maximum are left out. Addresses enter only as the
  /// segments' order, which is all malloc compares: two models with equal states serve the same
  /// calls alike, blocks in corresponding places, while new segments get addresses below the
  /// live ones (DeviceMemory's fresh addresses: no hints).
  std::vector<std::uint64_t> state(const absl::flat_hash_map<BlockHandle, std::uint64_t>& labels) const;

 private:
  static constexpr std::uint32_t kNone = 0xffffffffu;

  struct Block {
    std::uint64_t address = 0;
    std::uint64_t size = 0;
    std::uint64_t requested = 0;
    std::int64_t gc_count_base = 0;
    BlockHandle prev = kNone;
    BlockHandle next = kNone;
    std::uint32_t expandable = kNone;  // index into expandables_, kNone for cudaMalloc segments
    std::uint32_t pool = 0;            // index into pools_
    bool allocated = false;
    bool mapped = true;
    bool pending = false;  // freed, waiting on other streams' events (event_count > 0)
  };
  // Unmapped blocks ordered as BlockComparatorAddress within one stream.
  struct AddressKey {
    std::uint64_t address;
    BlockHandle block;
    friend bool operator<(const AddressKey& a, const AddressKey& b) {
      return a.address < b.address;
    }
  };
  struct Pool {
    FreeBlockSet blocks;  // free mapped blocks by (size, address)
    absl::btree_set<AddressKey> unmapped;
    std::int64_t get_free_blocks_call_count = 0;
    StreamId stream = 0;
    MemPoolId mem_pool = kDefaultPool;
    bool small = false;
  };
  struct ExpandableSegment {
    std::uint64_t base = 0;
    std::uint64_t page = 0;
    std::uint64_t size = 0;  // virtual range
  };
  struct Request {
    std::uint64_t size = 0;        // rounded
    std::uint64_t alloc_size = 0;  // segment size if a new one is needed
    std::uint32_t pool = 0;
    BlockHandle block = kNone;
  };

  std::uint32_t pool_index(StreamId stream, PoolKind kind, MemPoolId mem_pool) {
    const std::size_t slot = static_cast<std::size_t>(stream) * 2 + static_cast<std::size_t>(kind);
    if (mem_pool == kDefaultPool && slot < pool_by_stream_.size() && pool_by_stream_[slot] != kNone) [[likely]] {
      return pool_by_stream_[slot];
    }
    return add_pool(stream, kind, mem_pool);
  }
  std::uint32_t add_pool(StreamId stream, PoolKind kind, MemPoolId mem_pool);
  BlockHandle new_block(const Block& init);
  void drop_block(BlockHandle h);
  bool is_split(const Block& b) const { return b.prev != kNone || b.next != kNone; }
  void insert_free(BlockHandle h);
  void erase_free(BlockHandle h);
  void erase_unmapped(BlockHandle h);
  bool allocatable(BlockHandle h) const;

  bool get_free_block(Request& r);
  bool alloc_block(Request& r, bool is_retry);
  bool release_available_cached_blocks(const Request& r);
  void release_cached_blocks();
  void release_blocks(PoolKind kind);
  void release_block(BlockHandle h);
  void garbage_collect_cached_blocks();
  bool should_split(const Block& b, std::uint64_t size) const;
  BlockHandle alloc_found_block(Request& r, std::uint64_t orig_size, bool split);
  void free_block(BlockHandle h);
  std::uint64_t try_merge_blocks(BlockHandle dst, BlockHandle src);
  void synchronize_and_free_events();

  BlockHandle find_expandable_block(std::uint32_t pool, std::uint64_t size);
  BlockHandle try_allocate_expandable_block(std::uint32_t pool, std::uint64_t size);
  bool map_block(BlockHandle h, std::uint64_t size);
  void unmap_block(BlockHandle h);
  void release_expandable_segment(BlockHandle h);
  std::uint32_t new_expandable_segment(std::uint32_t pool, std::uint64_t base);
  std::uint64_t expandable_page(const Pool& pool) const;
  std::uint64_t expandable_range_size(std::uint64_t page) const;

  void add_reserved(std::uint64_t bytes);

  CachingAllocatorOptions options_;
  const AllocConfig& config_;
  DeviceMemory& device_;
  bool gc_enabled_ = false;
  std::vector<Block> blocks_;
  std::vector<BlockHandle> spare_handles_;
  std::vector<Pool> pools_;
  std::vector<std::uint32_t> pool_by_stream_;  // default pools: stream * 2 + kind → pools_ index (kNone = none)
  absl::flat_hash_map<std::uint64_t, std::uint32_t> private_pools_;  // (mem_pool, stream, kind) → pools_ index
  std::vector<ExpandableSegment> expandables_;
  std::vector<std::uint32_t> spare_expandables_;
  std::vector<BlockHandle> pending_;  // freed blocks waiting on events, in free order
  AllocatorStats stats_;
};

// Called a few times per malloc and free: inline.

inline BlockHandle CachingAllocator::new_block(const Block& init) {
  if (!spare_handles_.empty()) {
    const BlockHandle h = spare_handles_.back();
    spare_handles_.pop_back();
    blocks_[h] = init;
    return h;
  }
  blocks_.push_back(init);
  return static_cast<BlockHandle>(blocks_.size() - 1);
}

inline void CachingAllocator::drop_block(BlockHandle h) { spare_handles_.push_back(h); }

inline void CachingAllocator::insert_free(BlockHandle h) {
  Block& b = blocks_[h];
  Pool& pool = pools_[b.pool];
  b.gc_count_base = pool.get_free_blocks_call_count;
  pool.blocks.insert(b.size, b.address, h);
}

inline void CachingAllocator::erase_free(BlockHandle h) {
  pools_[blocks_[h].pool].blocks.erase(blocks_[h].size, blocks_[h].address);
}

}  // namespace fragscope::alloc
