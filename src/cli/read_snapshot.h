#pragma once
/// @file read_snapshot.h
/// @brief Reads a snapshot file for a subcommand, with the progress bar on stderr.

#include <string>

#include "snapshot/snapshot.h"

namespace fragscope::cli {

/// @brief read_snapshot_file(path) with a ProgressBar (drawn only on a terminal, large inputs).
/// @throws InputError as read_snapshot_file.
snapshot::Snapshot read_snapshot_with_progress(const std::string& path);

}  // namespace fragscope::cli
