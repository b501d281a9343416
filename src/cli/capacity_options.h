#pragma once
/// @file capacity_options.h
/// @brief The device options `replay` and `whatif` share: --capacity, --gpu, --unlimited,
/// --memory-fraction with --device-memory, and --device.

#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "replay/capacity.h"

namespace fragscope::cli {

struct CapacityFlags {
  std::string capacity;       ///< "40GiB", "40GB", "42805960704B", ... ("" = not given)
  std::string gpu;
  std::optional<double> memory_fraction;
  std::string device_memory;
  bool unlimited = false;
  std::optional<int> device;  ///< trace device (default: the busiest)

  /// @throws InputError naming the flag when a size does not parse or has no unit.
  replay::CapacityRequest request() const;
};

/// @brief Adds the flags to `cmd`, storing into `flags`.
void add_capacity_flags(CLI::App* cmd, CapacityFlags& flags);

}  // namespace fragscope::cli
