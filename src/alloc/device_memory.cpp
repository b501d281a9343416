#include "alloc/device_memory.h"

#include <stdexcept>

namespace fragscope::alloc {
namespace {
// Fresh addresses count down from 2^48, above any real CUDA address (user space ends at 2^47),
// so a fresh segment never collides with a hinted one; 2 MiB alignment as the driver's.
constexpr std::uint64_t kFreshTop = 1ull << 48;
constexpr std::uint64_t kFreshBottom = 1ull << 47;
constexpr std::uint64_t kAlign = 2ull << 20;
}  // namespace

DeviceMemory::DeviceMemory(std::optional<std::uint64_t> capacity)
    : capacity_(capacity), next_fresh_(kFreshTop) {}

bool DeviceMemory::overlaps_live(std::uint64_t address, std::uint64_t size) const {
  auto it = live_.upper_bound(address);
  if (it != live_.end() && it->first < address + size) return true;
  if (it == live_.begin()) return false;
  --it;
  return it->first + it->second > address;
}

std::uint64_t DeviceMemory::take_address(std::uint64_t size, bool address_space) {
  for (std::size_t i = 0; i < hints_.size(); ++i) {
    const AddressHint& hint = hints_[i];
    // A VA reservation is hinted by the first mapping at its start, whatever that mapping's size.
    const bool fits = address_space ? true : hint.size == size;
    if (!hint_used_[i] && fits && !overlaps_live(hint.address, size)) {
      hint_used_[i] = true;
      return hint.address;
    }
  }
  const std::uint64_t aligned = (size + kAlign - 1) / kAlign * kAlign;
  if (size > kFreshTop || next_fresh_ - kFreshBottom < aligned) {
    throw AddressSpaceExhausted(
        "the segments and expandable ranges the replay needs pass 128 TiB of device address space "
        "(hundreds of streams or memory pools with expandable segments; no real process holds that)");
  }
  next_fresh_ -= aligned;
  return next_fresh_;
}

std::optional<std::uint64_t> DeviceMemory::malloc(std::uint64_t size) {
  if (capacity_ && used_ + size > *capacity_) return std::nullopt;
  const std::uint64_t address = take_address(size, false);
  live_.emplace(address, size);
  used_ += size;
  return address;
}

void DeviceMemory::free(std::uint64_t address, std::uint64_t size) {
  if (live_.erase(address) != 1) throw std::logic_error("DeviceMemory::free of an unknown segment");
  used_ -= size;
}

std::uint64_t DeviceMemory::reserve_address_space(std::uint64_t size) {
  const std::uint64_t address = take_address(size, true);
  live_.emplace(address, size);
  return address;
}

void DeviceMemory::release_address_space(std::uint64_t address) { live_.erase(address); }

bool DeviceMemory::map(std::uint64_t bytes) {
  if (capacity_ && used_ + bytes > *capacity_) return false;
  used_ += bytes;
  return true;
}

void DeviceMemory::unmap(std::uint64_t bytes) { used_ -= bytes; }

void DeviceMemory::adopt(std::uint64_t address, std::uint64_t size) {
  live_.emplace(address, size);
  used_ += size;
}

void DeviceMemory::adopt_address_space(std::uint64_t address, std::uint64_t size) {
  live_.emplace(address, size);
}

void DeviceMemory::offer_hints(std::span<const AddressHint> hints) {
  hints_ = hints;
  hint_used_.assign(hints.size(), false);
}

}  // namespace fragscope::alloc
