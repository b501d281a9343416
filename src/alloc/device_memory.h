#pragma once
/// @file device_memory.h
/// @brief The simulated GPU under an allocator model: how much physical memory cudaMalloc and
/// cuMemCreate may still take, and which virtual addresses new segments get.
///
/// Capacity: a cudaMalloc (or the mapping of expandable-segment pages) fails when the bytes
/// already held plus the request exceed the capacity, as the driver does for one process.
/// Addresses: the allocator's best fit breaks size ties by address, so segment addresses matter.
/// When replaying a recorded trace the replay offers the addresses the real driver returned
/// (hints); otherwise, and when no hint fits, new segments get fresh addresses counting down
/// (the driver mostly hands out decreasing addresses) far from any real one.
/// Thread-safety: none; one DeviceMemory per model.

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include <absl/container/btree_map.h>

namespace fragscope::alloc {

/// @brief An address the real driver returned for a segment of `size` bytes.
struct AddressHint {
  std::uint64_t address = 0;
  std::uint64_t size = 0;
};

/// @brief Fresh addresses ran out: the segments and expandable ranges asked for pass the 128 TiB
/// between real CUDA addresses (below 2^47) and 2^48 (hundreds of expandable ranges the size of
/// a device; no real process holds them). The replay reports it as an input error.
class AddressSpaceExhausted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class DeviceMemory {
 public:
  /// @param capacity bytes this process may hold on the device; nullopt = unlimited.
  explicit DeviceMemory(std::optional<std::uint64_t> capacity = std::nullopt);

  /// @brief cudaMalloc(size): the segment's address, or nullopt when over capacity.
  /// @throws AddressSpaceExhausted (as reserve_address_space).
  std::optional<std::uint64_t> malloc(std::uint64_t size);
  /// @brief cudaFree of a segment returned by malloc(). REQUIRES: it is live.
  void free(std::uint64_t address, std::uint64_t size);

  /// @brief cuMemAddressReserve: a virtual range for an expandable segment (no physical memory).
  /// @throws AddressSpaceExhausted when no hint fits and the fresh addresses ran out.
  std::uint64_t reserve_address_space(std::uint64_t size);
  /// @brief cuMemAddressFree of a range from reserve_address_space().
  void release_address_space(std::uint64_t address);
  /// @brief cuMemCreate of `bytes` of pages; false (nothing taken) when over capacity.
  bool map(std::uint64_t bytes);
  /// @brief cuMemRelease of `bytes` of pages.
  void unmap(std::uint64_t bytes);

  /// @brief A segment that already exists when a replay starts mid-run (no capacity check).
  void adopt(std::uint64_t address, std::uint64_t size);
  /// @brief An expandable segment's virtual range that already exists at the start.
  void adopt_address_space(std::uint64_t address, std::uint64_t size);
  /// @brief Pages already mapped at the start (no capacity check).
  void adopt_pages(std::uint64_t bytes) { used_ += bytes; }

  /// @brief Addresses the next malloc()/reserve_address_space() calls should use when a size
  /// matches (replaces earlier hints). The span must outlive those calls.
  void offer_hints(std::span<const AddressHint> hints);

  /// @brief Memory outside this process's allocator moved: cudaMalloc now fails beyond
  /// `capacity` (what is held stays held, even above it).
  void set_capacity(std::optional<std::uint64_t> capacity) { capacity_ = capacity; }

  std::uint64_t used() const { return used_; }
  std::optional<std::uint64_t> capacity() const { return capacity_; }
  /// @brief The heap memory held for the address hints (the live ranges are bounded by the
  /// model's blocks: each holds at least one).
  std::uint64_t memory_bytes() const { return hint_used_.capacity() / 8; }

 private:
  bool overlaps_live(std::uint64_t address, std::uint64_t size) const;
  std::uint64_t take_address(std::uint64_t size, bool address_space);

  std::optional<std::uint64_t> capacity_;
  std::uint64_t used_ = 0;
  std::uint64_t next_fresh_;              // fresh addresses count down from here
  absl::btree_map<std::uint64_t, std::uint64_t> live_;  // start → size of live segments and VA ranges
  std::span<const AddressHint> hints_;
  std::vector<bool> hint_used_;
};

}  // namespace fragscope::alloc
