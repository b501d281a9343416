#pragma once
/// @file ideal_packer.h
/// @brief The lower bound of any allocator: memory equal to the live rounded bytes at every
/// moment, as if blocks could be moved and packed without gaps. Its peak is the floor every
/// real configuration is measured against ("how far from perfect").
///
/// allocated == Σ round_size(request) of live blocks (512-byte rounding plus the config's
/// roundup_power2_divisions: rounding is waste no placement can avoid). A private pool (a CUDA
/// graph's, torch.compile reduce-overhead's) keeps the most it ever held live: PyTorch never gives
/// its memory back, nor lends it to another pool, while its graphs live, however it is packed. So
/// reserved == the default pools' live bytes + Σ each private pool's peak live bytes, and malloc
/// fails only when that would exceed the device's capacity.
/// What it leaves out: a private pool's release once its graphs are gone (as CachingAllocator).
/// Thread-safety: none.

#include <vector>

#include "alloc/alloc_config.h"
#include "alloc/allocator_model.h"
#include "alloc/device_memory.h"

namespace fragscope::alloc {

class IdealPacker final : public AllocatorModel {
 public:
  /// @param device supplies the capacity; must outlive the packer.
  IdealPacker(const AllocConfig& config, DeviceMemory& device);

  using AllocatorModel::malloc;
  BlockHandle malloc(std::uint64_t size, StreamId stream, MemPoolId pool) override;
  void free(BlockHandle block) override;
  void free_requested(BlockHandle block) override { free(block); }
  void free_completed(BlockHandle) override {}
  std::vector<BlockHandle> restore(const std::vector<InitialSegment>& segments) override;
  const AllocatorStats& stats() const override { return stats_; }
  std::uint64_t address(BlockHandle block) const override { return block; }
  std::uint64_t memory_bytes() const override;

 private:
  /// What a private pool has live and the most it ever had (what it holds on the device).
  struct PrivatePool {
    std::uint64_t live = 0;
    std::uint64_t held = 0;
  };

  /// Device bytes `rounded` more in `pool` takes (0 when a private pool holds them already).
  std::uint64_t growth(std::uint64_t rounded, MemPoolId pool) const;
  BlockHandle take(std::uint64_t rounded, MemPoolId pool, std::uint64_t grown);

  AllocConfig config_;
  DeviceMemory& device_;
  std::vector<std::uint64_t> sizes_;  // handle → rounded size (0 = free slot)
  std::vector<MemPoolId> pools_;      // handle → its pool
  std::vector<BlockHandle> spare_;
  std::vector<PrivatePool> private_pools_;  // by MemPoolId; [kDefaultPool] unused
  AllocatorStats stats_;
};

}  // namespace fragscope::alloc
