#include "alloc/ideal_packer.h"

#include <algorithm>

#include "alloc/size_rules.h"

namespace fragscope::alloc {

IdealPacker::IdealPacker(const AllocConfig& config, DeviceMemory& device)
    : config_(config), device_(device) {}

BlockHandle IdealPacker::take(std::uint64_t rounded) {
  BlockHandle h;
  if (!spare_.empty()) {
    h = spare_.back();
    spare_.pop_back();
    sizes_[h] = rounded;
  } else {
    h = static_cast<BlockHandle>(sizes_.size());
    sizes_.push_back(rounded);
  }
  stats_.allocated_bytes += rounded;
  stats_.reserved_bytes = stats_.allocated_bytes;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  stats_.peak_reserved_bytes = stats_.peak_allocated_bytes;
  return h;
}

BlockHandle IdealPacker::malloc(std::uint64_t size, StreamId /*stream*/, MemPoolId /*pool*/) {
  const std::uint64_t rounded = round_size(size, config_);
  if (!device_.map(rounded)) {
    ++stats_.num_ooms;
    return kNoBlock;
  }
  return take(rounded);
}

void IdealPacker::free(BlockHandle block) {
  device_.unmap(sizes_[block]);
  stats_.allocated_bytes -= sizes_[block];
  stats_.reserved_bytes = stats_.allocated_bytes;
  sizes_[block] = 0;
  spare_.push_back(block);
}

std::uint64_t IdealPacker::memory_bytes() const {
  // A growing vector holds its old and new arrays for a moment: 1.5 times its capacity.
  return sizes_.capacity() * sizeof(std::uint64_t) * 3 / 2 + spare_.capacity() * sizeof(BlockHandle) * 3 / 2 +
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
      const std::uint64_t rounded = round_size(b.requested_size, config_);
      device_.adopt_pages(rounded);
      live.push_back(take(rounded));
    }
  }
  return live;
}

}  // namespace fragscope::alloc
