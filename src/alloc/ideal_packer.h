#pragma once
/// @file ideal_packer.h
/// @brief The lower bound of any allocator: memory equal to the live rounded bytes at every
/// moment, as if blocks could be moved and packed without gaps. Its peak is the floor every
/// real configuration is measured against ("how far from perfect").
///
/// reserved == allocated == Σ round_size(request) of live blocks (512-byte rounding plus the
/// config's roundup_power2_divisions: rounding is waste no placement can avoid). malloc fails
/// only when the live bytes would exceed the device's capacity.
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
  BlockHandle take(std::uint64_t rounded);

  AllocConfig config_;
  DeviceMemory& device_;
  std::vector<std::uint64_t> sizes_;  // handle → rounded size (0 = free slot)
  std::vector<BlockHandle> spare_;
  AllocatorStats stats_;
};

}  // namespace fragscope::alloc
