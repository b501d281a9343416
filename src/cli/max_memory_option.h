#pragma once
/// @file max_memory_option.h
/// @brief The `--max-memory SIZE` flag of every command that reads a snapshot: how much memory
/// the read may hold (snapshot/read_limits.h).

#include <CLI/CLI.hpp>

#include "snapshot/read_limits.h"

namespace fragscope::cli {

/// @brief Adds `--max-memory SIZE` ("16GiB", "12G") to `cmd`: a snapshot read may then hold up to
/// SIZE, and the limits relative to the file's size are off (the user vouches for the file).
/// `limits` must outlive `cmd`.
void add_max_memory_option(CLI::App* cmd, snapshot::ReadLimits& limits);

}  // namespace fragscope::cli
