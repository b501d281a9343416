#pragma once
/// @file oom_message.h
/// @brief What a PyTorch "CUDA out of memory" error message says, field by field.
///
/// Three message generations are understood (sizes are PyTorch's rounded "1.54 GiB" figures,
/// converted back to bytes, so each is exact only to its two decimals):
/// - kCurrent (PyTorch ≥ 2.1): "Tried to allocate 1.54 GiB. GPU 0 has a total capacity of
///   139.80 GiB of which 1017.12 MiB is free. [Process P has X memory in use. | Including
///   non-PyTorch memory, this process has X memory in use.] [X allowed; ]Of the allocated memory
///   35.25 GiB is allocated by PyTorch, [with X allocated in private pools (e.g., CUDA Graphs), ]
///   and 3.39 GiB is reserved by PyTorch but unallocated."
/// - kReservedInTotal (≈1.5 – 2.0): "Tried to allocate 20.00 MiB (GPU 0; 5.80 GiB total capacity;
///   4.36 GiB already allocated; 6.69 MiB free; 4.63 GiB reserved in total by PyTorch)".
/// - kCached (≤ 1.4): the same with "...; 4.68 MiB cached)" as its last figure.
/// Fields a message does not state stay nullopt; the derived reserved / unallocated pair is
/// filled in whenever the message gives enough to compute it.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fragscope::inputs {

enum class OomFormat : std::uint8_t { kCurrent, kReservedInTotal, kCached };

/// @brief One "Process P has X memory in use." clause (other processes on the same GPU).
struct OomProcessUsage {
  std::int64_t pid = 0;
  std::uint64_t bytes = 0;
};

struct OomMessage {
  std::size_t line = 0;         ///< 1-based line of the log where the message starts
  std::optional<int> rank;      ///< from a "[rank3]:" / "[default3]:" line prefix
  std::string backend = "CUDA"; ///< "CUDA", or "HIP" on ROCm builds
  OomFormat format = OomFormat::kCurrent;
  std::string text;             ///< the message, colour codes and line wraps removed
  /// Logged by the C shim that AOTInductor-compiled models and extension ops on PyTorch's stable ABI call through
  /// ("Exception in aoti_torch: CUDA out of memory..."): the shim turns the error into an error code, and Python
  /// gets a RuntimeError ("... API call failed"), which `except torch.OutOfMemoryError` does not catch.
  bool raised_in_c_shim = false;

  std::optional<std::uint64_t> tried_to_allocate;
  std::optional<int> gpu;
  std::optional<std::uint64_t> total_capacity;
  std::optional<std::uint64_t> free;  ///< what the driver reported free
  /// "Including non-PyTorch memory, this process has X memory in use" (newer PyTorch).
  std::optional<std::uint64_t> process_in_use;
  std::vector<OomProcessUsage> other_processes;  ///< "Process P has X memory in use" clauses
  std::optional<std::uint64_t> allowed;  ///< "X allowed;" (set_per_process_memory_fraction)
  /// Allocated by PyTorch; in kCurrent this figure includes `private_pools`.
  std::optional<std::uint64_t> allocated_by_pytorch;
  std::optional<std::uint64_t> private_pools;  ///< "with X allocated in private pools"
  std::optional<std::uint64_t> reserved_by_pytorch;    ///< allocated + reserved-but-unallocated
  std::optional<std::uint64_t> reserved_unallocated;   ///< cached free memory at the OOM
};

}  // namespace fragscope::inputs
