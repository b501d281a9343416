#include "alloc/ideal_packer.h"

#include <algorithm>

#include "alloc/size_rules.h"

namespace fragscope::alloc {

IdealPacker::IdealPacker(const AllocConfig& config, DeviceMemory& device)
    : config_(config), device_(device) {}

std::uint64_t IdealPacker::growth(std::uint64_t rounded, MemPoolId pool) const {
  if (pool == kDefaultPool) return rounded;
  const PrivatePool p = pool < private_pools_.size() ? private_pools_[pool] : PrivatePool{};
  return p.live + rounded > p.held ? p.live + rounded - p.held : 0;
}

BlockHandle IdealPacker::take(std::uint64_t rounded, MemPoolId pool, std::uint64_t grown) {
  BlockHandle h;
  if (!spare_.empty()) {
    h = spare_.back();
    spare_.pop_back();
    sizes_[h] = rounded;
    pools_[h] = pool;
  } else {
    h = static_cast<BlockHandle>(sizes_.size());
    sizes_.push_back(rounded);
    pools_.push_back(pool);
  }
  if (pool != kDefaultPool) {
    if (pool >= private_pools_.size()) private_pools_.resize(pool + 1);
    private_pools_[pool].live += rounded;
    private_pools_[pool].held += grown;
  }
  stats_.allocated_bytes += rounded;
  stats_.reserved_bytes += grown;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  return h;
}

BlockHandle IdealPacker::malloc(std::uint64_t size, StreamId /*stream*/, MemPoolId pool) {
  const std::uint64_t rounded = round_size(size, config_);
  const std::uint64_t grown = growth(rounded, pool);
  if (grown > 0 && !device_.map(grown)) {
    ++stats_.num_ooms;
    return kNoBlock;
  }
  return take(rounded, pool, grown);
}

void IdealPacker::free(BlockHandle block) {
  if (pools_[block] == kDefaultPool) {
    device_.unmap(sizes_[block]);
    stats_.reserved_bytes -= sizes_[block];
  } else {
    private_pools_[pools_[block]].live -= sizes_[block];  // its pool keeps the memory
  }
  stats_.allocated_bytes -= sizes_[block];
  sizes_[block] = 0;
  spare_.push_back(block);
}

std::uint64_t IdealPacker::memory_bytes() const {
  // A growing vector holds its old and new arrays for a moment: 1.5 times its capacity.
  return sizes_.capacity() * sizeof(std::uint64_t) * 3 / 2 + pools_.capacity() * sizeof(MemPoolId) * 3 / 2 +
         spare_.capacity() * sizeof(BlockHandle) * 3 / 2 + private_pools_.capacity() * sizeof(PrivatePool) +
         device_.memory_bytes();
}

std::vector<BlockHandle> IdealPacker::restore(const std::vector<InitialSegment>& segments) {
  std::vector<BlockHandle> live;
  for (const InitialSegment& segment : segments) {
    for (const InitialBlock& b : segment.live_blocks) {
      // Freed by the program before the trace starts, its stream work pending: the ideal packer
      // frees at free_requested, so the block is gone (its free_completed comes with no handle).
      if (b.pending_free) {
        live.push_back(kNoBlock);
        continue;
      }
      // A private pool's earlier peak is not in the trace: what it has live now is what it holds at least.
      const std::uint64_t rounded = round_size(b.requested_size, config_);
      const std::uint64_t grown = growth(rounded, segment.mem_pool);
      device_.adopt_pages(grown);
      live.push_back(take(rounded, segment.mem_pool, grown));
    }
  }
  return live;
}

}  // namespace fragscope::alloc
