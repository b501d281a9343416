// CachingAllocator::restore: a recorded snapshot's segments and live blocks laid into the model,
// so a replay can start mid-run. Not a rule of PyTorch's allocator: how the model adopts a state
// it did not build (caching_allocator.h has the contract).
#include "alloc/caching_allocator.h"

#include <algorithm>
#include <stdexcept>

namespace fragscope::alloc {

std::vector<BlockHandle> CachingAllocator::restore(const std::vector<InitialSegment>& segments) {
  if (stats_.reserved_bytes != 0) throw std::logic_error("CachingAllocator::restore after use");
  // Handles in input order: segments[i]'s live blocks start at first_live[i].
  std::vector<std::size_t> first_live(segments.size());
  std::size_t live_count = 0;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    first_live[i] = live_count;
    live_count += segments[i].live_blocks.size();
  }
  std::vector<BlockHandle> live(live_count, kNoBlock);

  // A new block [address, address + size) linked after `prev`.
  auto linked_block = [&](std::uint64_t address, std::uint64_t size, std::uint32_t pool, std::uint32_t expandable,
                          bool mapped, BlockHandle prev) {
    Block block;
    block.address = address;
    block.size = size;
    block.pool = pool;
    block.expandable = expandable;
    block.mapped = mapped;
    block.prev = prev;
    const BlockHandle h = new_block(block);
    if (prev != kNone) blocks_[prev].next = h;
    return h;
  };
  // Appends [address, address + size) after `prev`: live block `b` (the `index`-th in input
  // order), or free space when `b` is null.
  auto append = [&](std::uint64_t address, std::uint64_t size, const InitialBlock* b, std::size_t index,
                    std::uint32_t pool, std::uint32_t expandable, BlockHandle prev) {
    const BlockHandle h = linked_block(address, size, pool, expandable, /*mapped=*/true, prev);
    if (b) {
      blocks_[h].requested = b->requested_size;
      stats_.requested_bytes += b->requested_size;
      if (b->pending_free) {
        blocks_[h].pending = true;
        pending_.push_back(h);
      } else {
        blocks_[h].allocated = true;
        stats_.allocated_bytes += size;
      }
      live[index] = h;
    } else {
      insert_free(h);
    }
    return h;
  };
  auto unmapped_gap = [&](std::uint64_t from, std::uint64_t until, std::uint32_t pool, std::uint32_t segment,
                          BlockHandle prev) {
    if (until <= from) return prev;
    const BlockHandle h = linked_block(from, until - from, pool, segment, /*mapped=*/false, prev);
    pools_[pool].unmapped.insert(AddressKey{from, h});
    return h;
  };
  auto pool_of_segment = [&](const InitialSegment& s) {
    return pool_index(s.stream, s.small_pool ? PoolKind::kSmall : PoolKind::kLarge, s.mem_pool);
  };

  // cudaMalloc segments, as recorded, unless this allocator maps expandable segments: an
  // allocator of that kind holds no cudaMalloc segment, so it re-lays them below.
  std::vector<std::size_t> runs, relaid;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const InitialSegment& s = segments[i];
    if (s.expandable) {
      runs.push_back(i);
      continue;
    }
    if (config_.expandable_segments) {
      relaid.push_back(i);
      continue;
    }
    const std::uint32_t pool = pool_of_segment(s);
    device_.adopt(s.address, s.size);
    ++stats_.segments;
    BlockHandle prev = kNone;
    std::uint64_t cursor = s.address;
    for (std::size_t k = 0; k < s.live_blocks.size(); ++k) {
      const InitialBlock& b = s.live_blocks[k];
      if (b.address > cursor) prev = append(cursor, b.address - cursor, nullptr, 0, pool, kNone, prev);
      prev = append(b.address, b.size, &b, first_live[i] + k, pool, kNone, prev);
      cursor = b.address + b.size;
    }
    if (cursor < s.address + s.size) append(cursor, s.address + s.size - cursor, nullptr, 0, pool, kNone, prev);
    add_reserved(s.size);
  }

  // Mapped runs of one expandable segment, as recorded: grouped by (stream, pool), in address order.
  const auto by_pool_then_address = [&](std::size_t a, std::size_t b) {
    const InitialSegment& x = segments[a];
    const InitialSegment& y = segments[b];
    if (x.mem_pool != y.mem_pool) return x.mem_pool < y.mem_pool;
    if (x.stream != y.stream) return x.stream < y.stream;
    if (x.small_pool != y.small_pool) return x.small_pool;
    return x.address < y.address;
  };
  const auto same_pool = [&](std::size_t a, std::size_t b) {
    return segments[a].mem_pool == segments[b].mem_pool && segments[a].stream == segments[b].stream &&
           segments[a].small_pool == segments[b].small_pool;
  };
  std::stable_sort(runs.begin(), runs.end(), by_pool_then_address);
  for (std::size_t r = 0; r < runs.size();) {
    const InitialSegment& first = segments[runs[r]];
    const std::uint32_t pool = pool_of_segment(first);
    const std::uint32_t segment = new_expandable_segment(pool, first.address);
    const ExpandableSegment& es = expandables_[segment];
    device_.adopt_address_space(es.base, es.size);
    BlockHandle prev = kNone;
    std::uint64_t cursor = es.base;
    const std::size_t group = runs[r];
    for (; r < runs.size() && same_pool(runs[r], group) &&
           segments[runs[r]].address + segments[runs[r]].size <= es.base + es.size;
         ++r) {
      const InitialSegment& s = segments[runs[r]];
      prev = unmapped_gap(cursor, s.address, pool, segment, prev);
      device_.adopt_pages(s.size);
      cursor = s.address;
      for (std::size_t k = 0; k < s.live_blocks.size(); ++k) {
        const InitialBlock& b = s.live_blocks[k];
        if (b.address > cursor) prev = append(cursor, b.address - cursor, nullptr, 0, pool, segment, prev);
        prev = append(b.address, b.size, &b, first_live[runs[r]] + k, pool, segment, prev);
        cursor = b.address + b.size;
      }
      if (cursor < s.address + s.size)
        prev = append(cursor, s.address + s.size - cursor, nullptr, 0, pool, segment, prev);
      cursor = s.address + s.size;
      add_reserved(s.size);
    }
    unmapped_gap(cursor, es.base + es.size, pool, segment, prev);
  }

  // cudaMalloc segments under expandable segments. An allocator of that kind holds none: per
  // (stream, pool) one fresh expandable segment holds the live blocks back to back, in the order
  // of their recorded addresses, each of its rounded request (it splits off any remainder), in
  // the pages the recorded segments held (those past the last block are free, unmapped when the
  // memory is needed). An expandable allocator packs the blocks a job keeps this tightly: on
  // complete recordings cut mid-run, the replay from this start needs what the whole trace
  // needs within 0.6% (docs/replay.md).
  std::stable_sort(relaid.begin(), relaid.end(), by_pool_then_address);
  for (std::size_t r = 0; r < relaid.size();) {
    const InitialSegment& first = segments[relaid[r]];
    const std::uint32_t pool = pool_of_segment(first);
    const std::uint64_t page = expandable_page(pools_[pool]);
    const std::uint32_t segment =
        new_expandable_segment(pool, device_.reserve_address_space(expandable_range_size(page)));
    const ExpandableSegment& es = expandables_[segment];
    BlockHandle prev = kNone;
    std::uint64_t cursor = es.base;
    std::uint64_t held = 0;
    for (const std::size_t group = relaid[r]; r < relaid.size() && same_pool(relaid[r], group); ++r) {
      const InitialSegment& s = segments[relaid[r]];
      for (std::size_t k = 0; k < s.live_blocks.size(); ++k) {
        const InitialBlock& b = s.live_blocks[k];
        const std::uint64_t rounded = round_size(b.requested_size, config_);
        const std::uint64_t size = b.requested_size > 0 && rounded <= b.size ? rounded : b.size;
        prev = append(cursor, size, &b, first_live[relaid[r]] + k, pool, segment, prev);
        cursor += size;
      }
      held += s.size;
    }
    const std::uint64_t mapped = (std::max(held, cursor - es.base) + page - 1) / page * page;
    if (cursor < es.base + mapped) prev = append(cursor, es.base + mapped - cursor, nullptr, 0, pool, segment, prev);
    device_.adopt_pages(mapped);
    add_reserved(mapped);
    unmapped_gap(es.base + mapped, es.base + es.size, pool, segment, prev);
  }
  return live;
}

}  // namespace fragscope::alloc
