#pragma once
/// @file little_endian.h
/// @brief Reading short little-endian fields out of a byte buffer.

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace fragscope {

/// @brief The `n` bytes at `data` as a little-endian integer (the higher bytes zero).
/// Where 8 bytes are readable it loads one whole word and masks it: copying a variable number
/// of bytes and reading them back as a word stalls on store forwarding, and the reader does this
/// for most values of a snapshot.
/// REQUIRES: n <= 8, n <= readable, and `readable` bytes from `data` are readable.
/// x86-64 and aarch64 Linux, the platforms built for, are little-endian.
inline std::uint64_t load_little_endian(const void* data, std::size_t n, std::size_t readable) {
  std::uint64_t v = 0;
  if (readable >= 8) {
    std::memcpy(&v, data, 8);
    if (n < 8) v &= (std::uint64_t{1} << (8 * n)) - 1;
  } else {
    std::memcpy(&v, data, n);
  }
  return v;
}

}  // namespace fragscope
