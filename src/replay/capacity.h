#pragma once
/// @file capacity.h
/// @brief How much memory a replay's simulated GPU gives the process: the bytes at which
/// cudaMalloc fails, and the memory-fraction cap of set_per_process_memory_fraction.
///
/// Precedence: --capacity SIZE, then --gpu NAME (the card's memory less its CUDA-context
/// reserve, from util/gpu_catalog.h), then what the trace recorded: at an `oom` entry the
/// process could have reserved exactly reserved-at-that-moment + the entry's device_free; a
/// cudaMalloc that failed and was retried after a release burst bounds it from above. With no
/// evidence the device is unlimited. A memory-fraction cap comes from --memory-fraction, else
/// the recorded config, else an OOM message's "X allowed".
/// The driver's own word wins over device_free: a capacity from an OOM is brought within what
/// the trace's successes and refusals allow (at least the most served, less than the least
/// refused; device_free can overstate what a cudaMalloc gets by a page).
/// Capacity over time: when no one number explains the trace (CapacityPiece), each stretch
/// gets its own: device_free at its OOM when that fits its bounds, else one byte less than its
/// least refusal, else the most it served; the changes between stretches are the movements of
/// non-PyTorch memory.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "replay/prepared_trace.h"

namespace fragscope::replay {

/// @brief What the user asked for (all optional).
struct CapacityRequest {
  std::optional<std::uint64_t> capacity_bytes;  ///< --capacity
  std::optional<std::string> gpu;                ///< --gpu NAME
  std::optional<double> memory_fraction;         ///< --memory-fraction F
  std::optional<std::uint64_t> device_memory;    ///< --device-memory SIZE (totalGlobalMem)
  bool unlimited = false;                        ///< ignore the trace's evidence
  /// The process's cap from an OOM message ("X allowed;": set_per_process_memory_fraction was
  /// in force). The message rounds it to 0.01 GiB; the trace's own successes and failures
  /// narrow it. Ignored when --memory-fraction is given.
  std::optional<std::uint64_t> allowed_from_message;
};

/// @brief From `from_trace_index` on, cudaMalloc fails beyond `bytes`.
struct CapacityStep {
  std::uint32_t from_trace_index = 0;
  std::uint64_t bytes = 0;
};

/// @brief Where the memory outside the caching allocator moved: between two events the trace
/// shows the driver serving or refusing at levels the capacity before cannot explain.
struct CapacityChange {
  std::uint32_t after_trace_index = 0;  ///< the last event the old capacity explains for sure
  std::uint32_t by_trace_index = 0;     ///< the first event that needs the new one
  std::uint64_t from_bytes = 0;         ///< capacity before (as replayed)
  std::uint64_t to_bytes = 0;           ///< capacity after (as replayed)
  std::uint64_t at_least_bytes = 0;     ///< the least the trace proves it moved by
  bool non_pytorch_grew() const { return to_bytes < from_bytes; }
};

/// @brief The simulated device.
struct Capacity {
  std::optional<std::uint64_t> bytes;            ///< cudaMalloc fails beyond; nullopt = unlimited
  std::optional<std::uint64_t> allowed_maximum;  ///< fraction × device memory
  std::uint64_t device_total = 0;                ///< totalGlobalMem when known, else 0
  std::string source;                            ///< one line: where `bytes` comes from
  /// Capacity over time, when one number cannot explain the trace: steps[0] is `bytes` from
  /// event 0; empty for a constant capacity.
  std::vector<CapacityStep> steps;
  std::vector<CapacityChange> changes;  ///< between consecutive steps

  /// @brief What the process can hold: the tighter of `bytes` and `allowed_maximum`
  /// (nullopt when neither limits it).
  std::optional<std::uint64_t> effective_bytes() const {
    if (!allowed_maximum) return bytes;
    return bytes ? std::min(*bytes, *allowed_maximum) : *allowed_maximum;
  }
};

/// @brief Resolves `request` against what `trace` recorded.
/// @throws InputError for an unknown GPU name, a fraction outside (0, 1], or a fraction with
///         neither --device-memory nor --gpu to multiply it by.
Capacity resolve_capacity(const PreparedTrace& trace, const CapacityRequest& request);

}  // namespace fragscope::replay
