// CachingAllocator::state: the model's state as comparable words, so a replay can tell that a
// stretch of calls left it where it was (plan's steady micro-steps, src/plan/training_replay.h).
// Not a rule of PyTorch's allocator (caching_allocator.h has the contract).
#include "alloc/caching_allocator.h"

#include <algorithm>

namespace fragscope::alloc {
namespace {

// A block's flags word; a segment's first block also carries its pool above bit 16.
constexpr std::uint64_t kAllocated = 1, kMapped = 2, kPending = 4, kFirst = 8;

}  // namespace

std::vector<std::uint64_t> CachingAllocator::state(
    const absl::flat_hash_map<BlockHandle, std::uint64_t>& labels) const {
  std::vector<bool> dropped(blocks_.size(), false);
  for (BlockHandle h : spare_handles_) dropped[h] = true;
  std::vector<BlockHandle> firsts;
  for (BlockHandle h = 0; h < blocks_.size(); ++h)
    if (!dropped[h] && blocks_[h].prev == kNone) firsts.push_back(h);
  std::sort(firsts.begin(), firsts.end(),
            [&](BlockHandle a, BlockHandle b) { return blocks_[a].address < blocks_[b].address; });

  std::vector<std::uint64_t> words;
  for (BlockHandle first : firsts) {
    for (BlockHandle h = first; h != kNone; h = blocks_[h].next) {
      const Block& b = blocks_[h];
      std::uint64_t flags = (b.allocated ? kAllocated : 0) | (b.mapped ? kMapped : 0) | (b.pending ? kPending : 0);
      if (h == first) {
        const Pool& pool = pools_[b.pool];
        flags |= kFirst | std::uint64_t{pool.stream} << 16 | std::uint64_t{pool.mem_pool} << 32 |
                 std::uint64_t{pool.small} << 48 | std::uint64_t{b.expandable != kNone} << 49;
      }
      words.push_back(b.size);
      words.push_back(flags);
      if (h == first && b.expandable != kNone) {
        words.push_back(expandables_[b.expandable].page);
        words.push_back(expandables_[b.expandable].size);
      }
      if (b.allocated) {
        const auto label = labels.find(h);
        words.push_back(b.requested);
        words.push_back(label == labels.end() ? 0 : label->second);
      } else if (gc_enabled_ && b.mapped && !b.pending) {
        words.push_back(static_cast<std::uint64_t>(pools_[b.pool].get_free_blocks_call_count - b.gc_count_base));
      }
    }
  }
  return words;
}

}  // namespace fragscope::alloc
