#pragma once
/// @file stream_reader.h
/// @brief The one-thread reader: one pickle machine over one byte source, start to end. Both
/// the file reader (snapshot_reader.h) and the reader in parts (parallel_reader.h) end here when
/// a stream cannot be read in parts.

#include <cstdint>
#include <string>

#include "snapshot/byte_source.h"
#include "snapshot/progress_callback.h"
#include "snapshot/read_limits.h"
#include "snapshot/snapshot.h"

namespace fragscope::snapshot {

/// @brief Reads a snapshot from an already opened (and, where needed, decompressing) source.
/// `name` names it in errors; `input_size` is the compressed size for progress (0 = unknown).
/// @throws InputError as read_snapshot_file.
Snapshot read_snapshot(ByteSource& source, const std::string& name, std::uint64_t input_size = 0,
                       const ProgressCallback& progress = {}, const ReadLimits& limits = {});

}  // namespace fragscope::snapshot
