#include "alloc/caching_allocator.h"

#include <algorithm>

namespace fragscope::alloc {
namespace {
// Without a known device size the virtual range of an expandable segment is sized for 1 TiB:
// large enough never to run out before the physical memory does.
constexpr std::uint64_t kDefaultTotalMemory = 1ull << 40;
}  // namespace

CachingAllocator::CachingAllocator(const CachingAllocatorOptions& options, DeviceMemory& device)
    : options_(options), config_(options_.config), device_(device) {
  gc_enabled_ = options_.allowed_memory_maximum && config_.garbage_collection_threshold > 0.0;
}

// The steps of malloc and free that every call takes, inlined into them: as calls they spent a
// tenth of a replay's instructions saving and restoring registers.
#define FRAGSCOPE_HOT_INLINE [[gnu::always_inline]] inline

// ---------------------------------------------------------------------------------------------
// Bookkeeping

std::uint32_t CachingAllocator::add_pool(StreamId stream, PoolKind kind, MemPoolId mem_pool) {
  const std::size_t slot = static_cast<std::size_t>(stream) * 2 + static_cast<std::size_t>(kind);
  std::uint32_t* index = nullptr;
  if (mem_pool == kDefaultPool) {
    if (slot >= pool_by_stream_.size()) pool_by_stream_.resize(slot + 2, kNone);
    index = &pool_by_stream_[slot];
  } else {
    // Private pools live apart: the release paths that walk pool_by_stream_ never see them.
    index = &private_pools_.try_emplace((std::uint64_t{mem_pool} << 32) | slot, kNone).first->second;
  }
  if (*index == kNone) {
    *index = static_cast<std::uint32_t>(pools_.size());
    Pool& pool = pools_.emplace_back();
    pool.stream = stream;
    pool.mem_pool = mem_pool;
    pool.small = kind == PoolKind::kSmall;
  }
  return *index;
}

void CachingAllocator::erase_unmapped(BlockHandle h) {
  pools_[blocks_[h].pool].unmapped.erase(AddressKey{blocks_[h].address, h});
}

bool CachingAllocator::allocatable(BlockHandle h) const {
  return h != kNone && !blocks_[h].allocated && !blocks_[h].pending;
}

void CachingAllocator::add_reserved(std::uint64_t bytes) {
  stats_.reserved_bytes += bytes;
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
}

// ---------------------------------------------------------------------------------------------
// malloc

BlockHandle CachingAllocator::malloc(std::uint64_t orig_size, StreamId stream, MemPoolId mem_pool) {
  Request r;
  r.size = round_size(orig_size, config_);
  r.pool = pool_index(stream, pool_of(r.size), mem_pool);
  r.alloc_size = allocation_size(r.size, config_);

  bool found = get_free_block(r);
  if (!found) {
    if (gc_enabled_) garbage_collect_cached_blocks();
    found = alloc_block(r, false) ||
            (release_available_cached_blocks(r) && alloc_block(r, false)) ||
            (release_cached_blocks(), alloc_block(r, true));
  }
  if (!found) {
    ++stats_.num_ooms;
    return kNoBlock;
  }
  const bool split = should_split(blocks_[r.block], r.size);
  return alloc_found_block(r, orig_size, split);
}

FRAGSCOPE_HOT_INLINE bool CachingAllocator::get_free_block(Request& r) {
  Pool& pool = pools_[r.pool];
  if (gc_enabled_) ++pool.get_free_blocks_call_count;
  auto it = pool.blocks.lower_bound(r.size);
  if (it == pool.blocks.end()) return false;

  if (blocks_[it->block()].expandable != kNone) {
    if (config_.expandable_segments) {
      // Best fit counts an expandable block as the size it can grow to (its free tail pages).
      auto expandable_size = [&](BlockHandle h) {
        const Block& b = blocks_[h];
        const bool tail = b.next != kNone && !blocks_[b.next].mapped;
        return b.size + (tail ? blocks_[b.next].size : 0);
      };
      auto next = std::next(it);
      while (blocks_[it->block()].expandable != kNone && next != pool.blocks.end() &&
             expandable_size(next->block()) < expandable_size(it->block())) {
        it = next++;
      }
    } else {
      // Expandable segments were switched off: only plain segments may serve the request.
      do {
        ++it;
      } while (it != pool.blocks.end() && blocks_[it->block()].expandable != kNone);
      if (it == pool.blocks.end()) return false;
    }
  }
  const std::uint64_t found_size = it->size;
  // An oversize block never serves a small request, and a large one only within the tolerance.
  if (r.size < config_.max_split_size && found_size >= config_.max_split_size) return false;
  if (r.size >= config_.max_split_size &&
      found_size >= r.size + config_.max_non_split_rounding) {
    return false;
  }
  r.block = it->block();
  pool.blocks.erase(it);
  return true;
}

bool CachingAllocator::alloc_block(Request& r, bool is_retry) {
  if (is_retry) ++stats_.num_alloc_retries;
  if (options_.allowed_memory_maximum &&
      stats_.reserved_bytes + r.alloc_size > *options_.allowed_memory_maximum) {
    return false;
  }
  if (config_.expandable_segments) {
    r.block = try_allocate_expandable_block(r.pool, r.size);
    return r.block != kNone;
  }
  const auto address = device_.malloc(r.alloc_size);
  if (!address) return false;
  Block segment;
  segment.address = *address;
  segment.size = r.alloc_size;
  segment.pool = r.pool;
  r.block = new_block(segment);
  ++stats_.segments;
  ++stats_.num_device_alloc;
  add_reserved(r.alloc_size);
  log_segment(SegmentAction::kAlloc, *address, r.alloc_size);
  return true;
}

FRAGSCOPE_HOT_INLINE bool CachingAllocator::should_split(const Block& b, std::uint64_t size) const {
  const std::uint64_t remaining = b.size - size;
  // b's pool is small exactly when the rounded request is (malloc picks the pool by it).
  if (pool_of(size) == PoolKind::kSmall || config_.expandable_segments) return remaining >= kMinBlockSize;
  return size < config_.max_split_size && remaining > kSmallSize;
}

FRAGSCOPE_HOT_INLINE BlockHandle CachingAllocator::alloc_found_block(Request& r, std::uint64_t orig_size, bool split) {
  BlockHandle h = r.block;
  if (split) {
    // The request takes the front; the remainder stays cached at the higher address.
    const BlockHandle remaining = h;
    Block front;
    front.address = blocks_[remaining].address;
    front.size = r.size;
    front.pool = r.pool;
    front.expandable = blocks_[remaining].expandable;
    front.prev = blocks_[remaining].prev;
    front.next = remaining;
    h = new_block(front);
    if (blocks_[h].prev != kNone) blocks_[blocks_[h].prev].next = h;
    Block& rest = blocks_[remaining];
    rest.prev = h;
    rest.address += r.size;
    rest.size -= r.size;
    insert_free(remaining);
  }
  Block& b = blocks_[h];
  b.allocated = true;
  b.requested = orig_size;
  stats_.allocated_bytes += b.size;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  stats_.requested_bytes += orig_size;
  return h;
}

// ---------------------------------------------------------------------------------------------
// free

void CachingAllocator::free(BlockHandle h) {
  Block& b = blocks_[h];
  b.allocated = false;
  stats_.allocated_bytes -= b.size;
  free_block(h);
}

void CachingAllocator::free_requested(BlockHandle h) {
  Block& b = blocks_[h];
  b.allocated = false;
  b.pending = true;
  stats_.allocated_bytes -= b.size;
  pending_.push_back(h);
}

void CachingAllocator::free_completed(BlockHandle h) {
  if (!blocks_[h].pending) return;  // already freed by a synchronising release
  blocks_[h].pending = false;
  pending_.erase(std::find(pending_.begin(), pending_.end(), h));
  free_block(h);
}

FRAGSCOPE_HOT_INLINE void CachingAllocator::free_block(BlockHandle h) {
  stats_.requested_bytes -= blocks_[h].requested;
  blocks_[h].requested = 0;
  try_merge_blocks(h, blocks_[h].prev);
  try_merge_blocks(h, blocks_[h].next);
  insert_free(h);
}

FRAGSCOPE_HOT_INLINE std::uint64_t CachingAllocator::try_merge_blocks(BlockHandle dst, BlockHandle src) {
  if (src == kNone) return 0;
  const Block& s = blocks_[src];
  Block& d = blocks_[dst];
  if (s.allocated || s.pending || s.mapped != d.mapped) return 0;
  if (s.mapped) {
    erase_free(src);
  } else {
    erase_unmapped(src);
  }
  if (d.prev == src) {
    d.address = s.address;
    d.prev = s.prev;
    if (d.prev != kNone) blocks_[d.prev].next = dst;
  } else {
    d.next = s.next;
    if (d.next != kNone) blocks_[d.next].prev = dst;
  }
  const std::uint64_t subsumed = s.size;
  d.size += subsumed;
  drop_block(src);
  return subsumed;
}

void CachingAllocator::synchronize_and_free_events() {
  ++stats_.num_sync_all_streams;
  std::vector<BlockHandle> waiting;
  waiting.swap(pending_);
  for (BlockHandle h : waiting) {
    blocks_[h].pending = false;
    free_block(h);
  }
}

// ---------------------------------------------------------------------------------------------
// Release paths

void CachingAllocator::release_block(BlockHandle h) {
  const Block& b = blocks_[h];
  ++stats_.num_device_free;
  log_segment(SegmentAction::kFree, b.address, b.size);
  device_.free(b.address, b.size);
  stats_.reserved_bytes -= b.size;
  --stats_.segments;
  erase_free(h);
  drop_block(h);
}

bool CachingAllocator::release_available_cached_blocks(const Request& r) {
  if (config_.max_split_size == kNoSplitLimit) return false;
  Pool& pool = pools_[r.pool];
  const std::uint64_t key = std::max(r.size, config_.max_split_size);
  // Only whole cudaMalloc segments can be freed. Under one config from the process start an
  // oversize free block always is one; a what-if that starts from a state recorded under another
  // config can hold oversize pieces of split segments, which stay.
  auto releasable = [&](BlockHandle h) { return blocks_[h].expandable == kNone && !is_split(blocks_[h]); };
  auto it = pool.blocks.lower_bound(key);
  if (it != pool.blocks.end() && releasable(it->block())) {
    release_block(it->block());
    return true;
  }
  // No single block is large enough: free oversize blocks from the largest down.
  if (it == pool.blocks.begin()) return false;
  std::uint64_t released = 0;
  std::vector<BlockHandle> victims;
  for (auto cur = std::prev(it); released < key && cur->size >= config_.max_split_size;) {
    if (releasable(cur->block())) {
      released += cur->size;
      victims.push_back(cur->block());
    }
    if (cur == pool.blocks.begin()) break;
    --cur;
  }
  for (BlockHandle h : victims) release_block(h);
  return released >= key;
}

void CachingAllocator::release_cached_blocks() {
  synchronize_and_free_events();
  release_blocks(PoolKind::kLarge);
  release_blocks(PoolKind::kSmall);
}

void CachingAllocator::empty_cache() { release_cached_blocks(); }

std::uint64_t CachingAllocator::memory_bytes() const {
  // A block sits in at most one unmapped set and holds at most one DeviceMemory range: two B-tree
  // entries, counted twice for the trees' nodes. A growing array holds its old and new storage
  // for a moment: 1.5 times its capacity.
  constexpr std::uint64_t kTreeBytesPerBlock = 2 * 2 * sizeof(AddressKey);
  std::uint64_t bytes = blocks_.capacity() * (sizeof(Block) * 3 / 2 + kTreeBytesPerBlock);
  bytes += (spare_handles_.capacity() + pending_.capacity()) * sizeof(BlockHandle) * 3 / 2;
  bytes += expandables_.capacity() * sizeof(ExpandableSegment) + spare_expandables_.capacity() * sizeof(std::uint32_t);
  bytes += pools_.capacity() * sizeof(Pool) + pool_by_stream_.capacity() * sizeof(std::uint32_t) +
           private_pools_.capacity() * (sizeof(std::uint64_t) + sizeof(std::uint32_t));
  for (const Pool& pool : pools_) bytes += pool.blocks.memory_bytes();
  return bytes + device_.memory_bytes();
}

void CachingAllocator::release_blocks(PoolKind kind) {
  std::vector<BlockHandle> to_release;
  std::vector<BlockHandle> to_unmap;
  for (std::size_t slot = static_cast<std::size_t>(kind); slot < pool_by_stream_.size();
       slot += 2) {
    if (pool_by_stream_[slot] == kNone) continue;
    for (const FreeBlockSet::Entry& entry : pools_[pool_by_stream_[slot]].blocks) {
      const BlockHandle h = entry.block();
      if (blocks_[h].expandable != kNone) {
        to_unmap.push_back(h);
      } else if (!is_split(blocks_[h])) {
        to_release.push_back(h);
      }
    }
  }
  for (BlockHandle h : to_release) release_block(h);
  for (BlockHandle h : to_unmap) {
    unmap_block(h);
    if (!blocks_[h].mapped && !is_split(blocks_[h])) release_expandable_segment(h);
  }
}

void CachingAllocator::garbage_collect_cached_blocks() {
  const auto threshold = static_cast<std::uint64_t>(
      config_.garbage_collection_threshold *
      static_cast<double>(*options_.allowed_memory_maximum));
  if (stats_.reserved_bytes <= threshold) return;
  const std::uint64_t target = stats_.reserved_bytes - threshold;

  auto gc_count = [&](const Block& b) {
    return static_cast<std::uint64_t>(pools_[b.pool].get_free_blocks_call_count - b.gc_count_base);
  };
  auto for_each_large = [&](auto&& fn) {
    for (std::size_t slot = 1; slot < pool_by_stream_.size(); slot += 2) {
      if (pool_by_stream_[slot] == kNone) continue;
      for (const FreeBlockSet::Entry& entry : pools_[pool_by_stream_[slot]].blocks) fn(entry.block());
    }
  };
  std::uint64_t total_age = 0;
  std::int64_t freeable = 0;
  for_each_large([&](BlockHandle h) {
    if (!is_split(blocks_[h])) {
      total_age += gc_count(blocks_[h]);
      ++freeable;
    }
  });
  if (freeable == 0) return;

  std::uint64_t reclaimed = 0;
  bool freed = true;
  while (reclaimed < target && freed && freeable > 0) {
    const double age_threshold = static_cast<double>(total_age) / static_cast<double>(freeable);
    freed = false;
    std::vector<BlockHandle> victims;
    for_each_large([&](BlockHandle h) {
      const Block& b = blocks_[h];
      if (!is_split(b) && b.expandable == kNone &&
          static_cast<double>(gc_count(b)) >= age_threshold) {
        victims.push_back(h);
      }
    });
    for (BlockHandle h : victims) {
      freed = true;
      reclaimed += blocks_[h].size;
      total_age -= gc_count(blocks_[h]);
      --freeable;
      release_block(h);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Expandable segments

std::uint64_t CachingAllocator::expandable_page(const Pool& pool) const {
  return pool.small ? kSmallBuffer : config_.large_segment_size;
}

std::uint64_t CachingAllocator::expandable_range_size(std::uint64_t page) const {
  const std::uint64_t total =
      options_.device_total_memory ? options_.device_total_memory : kDefaultTotalMemory;
  return (total + total / 8 + page - 1) / page * page;
}

std::uint32_t CachingAllocator::new_expandable_segment(std::uint32_t pool, std::uint64_t base) {
  ExpandableSegment segment;
  segment.page = expandable_page(pools_[pool]);
  segment.size = expandable_range_size(segment.page);
  segment.base = base;
  if (!spare_expandables_.empty()) {
    const std::uint32_t index = spare_expandables_.back();
    spare_expandables_.pop_back();
    expandables_[index] = segment;
    return index;
  }
  expandables_.push_back(segment);
  return static_cast<std::uint32_t>(expandables_.size() - 1);
}

BlockHandle CachingAllocator::find_expandable_block(std::uint32_t pool_id, std::uint64_t size) {
  Pool& pool = pools_[pool_id];
  auto has_room = [&](BlockHandle h) {
    std::uint64_t bytes = 0;
    while (bytes < size && allocatable(h)) {
      bytes += blocks_[h].size;
      h = blocks_[h].next;
    }
    return bytes >= size;
  };
  // The lowest address where free and unmapped space together fit the request.
  for (const AddressKey& key : pool.unmapped) {
    BlockHandle candidate = key.block;
    if (allocatable(blocks_[candidate].prev)) candidate = blocks_[candidate].prev;
    if (has_room(candidate)) return candidate;
  }
  const std::uint64_t range = expandable_range_size(expandable_page(pool));
  const std::uint32_t segment = new_expandable_segment(pool_id, device_.reserve_address_space(range));
  Block whole;
  whole.address = expandables_[segment].base;
  whole.size = range;
  whole.pool = pool_id;
  whole.expandable = segment;
  whole.mapped = false;
  const BlockHandle h = new_block(whole);
  pool.unmapped.insert(AddressKey{whole.address, h});
  return h;
}

BlockHandle CachingAllocator::try_allocate_expandable_block(std::uint32_t pool,
                                                            std::uint64_t size) {
  // A segment's range is the device's whole memory: a larger request fits in none. On a device mapping it fails
  // first; under an unlimited capacity (plan's first replay) the walk below would run past the segment's end.
  if (size > expandable_range_size(expandable_page(pools_[pool]))) return kNone;
  BlockHandle candidate = find_expandable_block(pool, size);
  // candidate is: unmapped → end, unmapped → free → …, or free → unmapped → …
  if (!blocks_[candidate].mapped &&
      !map_block(candidate, std::min(blocks_[candidate].size, size))) {
    return kNone;
  }
  while (blocks_[candidate].size < size) {
    const std::uint64_t remaining = size - blocks_[candidate].size;
    const BlockHandle next = blocks_[candidate].next;
    if (!map_block(next, std::min(remaining, blocks_[next].size))) return kNone;
    candidate = next;  // map_block merged the free candidate into it
  }
  erase_free(candidate);
  return candidate;
}

bool CachingAllocator::map_block(BlockHandle h, std::uint64_t size) {
  const ExpandableSegment& segment = expandables_[blocks_[h].expandable];
  // Whole pages from the block's (page-aligned) start.
  const std::uint64_t mapped = (size + segment.page - 1) / segment.page * segment.page;
  if (!device_.map(mapped)) return false;
  erase_unmapped(h);
  const std::uint64_t mapped_address = blocks_[h].address;
  blocks_[h].mapped = true;
  if (mapped < blocks_[h].size) {
    Block rest;
    rest.address = blocks_[h].address + mapped;
    rest.size = blocks_[h].size - mapped;
    rest.pool = blocks_[h].pool;
    rest.expandable = blocks_[h].expandable;
    rest.mapped = false;
    rest.prev = h;
    rest.next = blocks_[h].next;
    const BlockHandle r = new_block(rest);
    if (blocks_[r].next != kNone) blocks_[blocks_[r].next].prev = r;
    blocks_[h].next = r;
    blocks_[h].size = mapped;
    pools_[blocks_[r].pool].unmapped.insert(AddressKey{blocks_[r].address, r});
  }
  try_merge_blocks(h, blocks_[h].prev);
  try_merge_blocks(h, blocks_[h].next);
  insert_free(h);
  add_reserved(mapped);
  ++stats_.num_device_alloc;
  log_segment(SegmentAction::kMap, mapped_address, mapped);
  return true;
}

void CachingAllocator::unmap_block(BlockHandle h) {
  const ExpandableSegment& segment = expandables_[blocks_[h].expandable];
  const std::uint64_t start = blocks_[h].address - segment.base;
  const std::uint64_t end = start + blocks_[h].size;
  // Only pages entirely inside the free block go back to the driver.
  const std::uint64_t first_page = (start + segment.page - 1) / segment.page;
  const std::uint64_t end_page = end / segment.page;
  if (first_page >= end_page) return;
  erase_free(h);
  const std::uint64_t unmapped_address = segment.base + first_page * segment.page;
  const std::uint64_t unmapped_size = (end_page - first_page) * segment.page;

  auto add_free_piece = [&](std::uint64_t address, std::uint64_t size, BlockHandle prev,
                            BlockHandle next) {
    Block piece;
    piece.address = address;
    piece.size = size;
    piece.pool = blocks_[h].pool;
    piece.expandable = blocks_[h].expandable;
    piece.prev = prev;
    piece.next = next;
    const BlockHandle p = new_block(piece);
    if (prev != kNone) blocks_[prev].next = p;
    if (next != kNone) blocks_[next].prev = p;
    insert_free(p);
  };
  const std::uint64_t before = unmapped_address - blocks_[h].address;
  const std::uint64_t after = blocks_[h].size - before - unmapped_size;
  if (before > 0) add_free_piece(blocks_[h].address, before, blocks_[h].prev, h);
  if (after > 0) add_free_piece(unmapped_address + unmapped_size, after, h, blocks_[h].next);

  blocks_[h].address = unmapped_address;
  blocks_[h].size = unmapped_size;
  blocks_[h].mapped = false;
  try_merge_blocks(h, blocks_[h].prev);
  try_merge_blocks(h, blocks_[h].next);
  pools_[blocks_[h].pool].unmapped.insert(AddressKey{blocks_[h].address, h});

  device_.unmap(unmapped_size);
  stats_.reserved_bytes -= unmapped_size;
  ++stats_.num_device_free;
  log_segment(SegmentAction::kUnmap, unmapped_address, unmapped_size);
}

void CachingAllocator::release_expandable_segment(BlockHandle h) {
  const std::uint32_t segment = blocks_[h].expandable;
  erase_unmapped(h);
  device_.release_address_space(expandables_[segment].base);
  spare_expandables_.push_back(segment);
  drop_block(h);
}

}  // namespace fragscope::alloc
