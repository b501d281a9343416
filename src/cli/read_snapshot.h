#pragma once
/// @file read_snapshot.h
/// @brief Reads a snapshot file for a subcommand, with the progress bar on stderr, within the
/// memory limits its --max-memory flag sets.

#include <string>

#include <CLI/CLI.hpp>

#include "snapshot/read_limits.h"
#include "snapshot/snapshot.h"

namespace fragscope::cli {

/// @brief Adds `--max-memory SIZE` ("16G", "12 GiB") to `cmd`: a snapshot read may then hold
/// up to SIZE, and the limits relative to the file's size are off (snapshot/read_limits.h).
/// `limits` must outlive `cmd`.
void add_max_memory_option(CLI::App* cmd, snapshot::ReadLimits& limits);

/// @brief read_snapshot_file(path) with a ProgressBar (drawn only on a terminal, large inputs).
/// @throws InputError as read_snapshot_file.
snapshot::Snapshot read_snapshot_with_progress(const std::string& path, const snapshot::ReadLimits& limits = {});

}  // namespace fragscope::cli
