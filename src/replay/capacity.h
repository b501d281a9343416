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

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

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

/// @brief The simulated device.
struct Capacity {
  std::optional<std::uint64_t> bytes;            ///< cudaMalloc fails beyond; nullopt = unlimited
  std::optional<std::uint64_t> allowed_maximum;  ///< fraction × device memory
  std::uint64_t device_total = 0;                ///< totalGlobalMem when known, else 0
  std::string source;                            ///< one line: where `bytes` comes from

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
