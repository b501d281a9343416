#include "alloc/size_rules.h"

#include <algorithm>
#include <bit>

namespace fragscope::alloc {

std::uint64_t roundup_power2_next_division(std::uint64_t size, std::uint64_t divisions) {
  if (std::has_single_bit(size)) return size;
  const std::uint64_t floor = std::bit_floor(size);
  const std::uint64_t step = floor >> (std::bit_width(divisions) - 1);
  if (step == 0) return floor << 1;
  const std::uint64_t down = size & ~(step - 1);
  return down == size ? size : down + step;
}

}  // namespace fragscope::alloc
