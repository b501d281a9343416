#pragma once
/// @file read_limits.h
/// @brief How much memory reading a snapshot may take, so that a small file cannot make a large
/// model: every limit is relative to the bytes actually read, under an absolute ceiling.
///
/// - The decompressed stream: at most kMaxDecompressionRatio times the compressed bytes read plus
///   kDecompressionFloor. A short trace of a real job compresses far more than a long one (its
///   repeated stacks dominate): the field recordings reach 75 times under gzip -9 and 187 under zstd
///   --ultra -22 (7.6 MB of pickle in 41 KB); the most any recording of the repository needs, in
///   any of those formats, is 46 times plus 16 MiB (a 24.6 MB pickle in 195 KB). A 384 KB zstd bomb
///   that unpacked to 4 GiB stops at 40 MiB.
/// - The pickle machine and the model it builds: at most kMemoryPerPickleByte bytes per byte of
///   pickle read so far (plus kMemoryFloor), and at most ReadLimits::max_memory in all. References
///   (a trace that names one entry 2^24 times, a segment list that repeats one segment) are what
///   makes a model outgrow its pickle: each copy counts when it is made, so the read stops there.
///   Real snapshots hold 0.5 to 1.0 byte per byte of pickle (1.6 for the smallest, where fixed
///   buffers weigh), measured on every recording of the repository.
/// Together they bound what a file under 1 MB can cost: a stream of at most 80 MiB, a model of at
/// most 192 MiB, and every command stays under 512 MB (tests/cli/hostile_inputs_test.cpp).
/// A user who vouches for a file (`--max-memory SIZE`) lifts both relative limits: only SIZE holds.
/// A read past a limit throws InputError naming the file, the limit and the flag.
/// Thread-safety: plain values.

#include <cstdint>

namespace fragscope::snapshot {

inline constexpr std::uint64_t kMaxDecompressionRatio = 64;
inline constexpr std::uint64_t kDecompressionFloor = std::uint64_t{16} << 20;
inline constexpr std::uint64_t kMemoryPerPickleByte = 2;
inline constexpr std::uint64_t kMemoryFloor = std::uint64_t{32} << 20;
/// @brief The absolute ceiling unless raised (`--max-memory`): a 1 GB pickle needs about 1 GB.
inline constexpr std::uint64_t kDefaultMaxMemory = std::uint64_t{8} << 30;

struct ReadLimits {
  /// The most the reader may hold (machine and model), whatever the file's size.
  std::uint64_t max_memory = kDefaultMaxMemory;
  /// The limits relative to the bytes read (decompression ratio, memory per pickle byte); off
  /// when the user vouched for the file by giving max_memory.
  bool relative = true;

  /// @brief What `pickle_bytes` of pickle read may hold.
  std::uint64_t allowed(std::uint64_t pickle_bytes) const {
    if (!relative || pickle_bytes >= max_memory / kMemoryPerPickleByte) return max_memory;
    const std::uint64_t bytes = kMemoryPerPickleByte * pickle_bytes + kMemoryFloor;
    return bytes < max_memory ? bytes : max_memory;
  }
};

}  // namespace fragscope::snapshot
