#pragma once
/// @file snapshot_reader.h
/// @brief Reads `torch.cuda.memory._dump_snapshot()` files safely: plain, gzip or zstd
/// (recognised by magic bytes, not by name), pickle protocols 2–5, modern and legacy layouts.
///
/// Never executes anything: opcodes that would import or call code (GLOBAL, STACK_GLOBAL,
/// REDUCE, BUILD, INST, OBJ, NEWOBJ, PERSID, ...) are refused with an InputError.
/// A large uncompressed input is read in parts (parallel_reader.h), anything else by the
/// one-thread reader (stream_reader.h). Both stay within `limits` (read_limits.h).

#include <cstdint>
#include <span>
#include <string>

#include "snapshot/progress_callback.h"
#include "snapshot/read_limits.h"
#include "snapshot/snapshot.h"

namespace fragscope::snapshot {

/// @brief Reads the snapshot file at `path`.
/// @throws InputError naming `path` when it is missing, unreadable, a special file (a pipe is
///         read), not a snapshot, corrupt, truncated, hostile or past `limits`.
Snapshot read_snapshot_file(const std::string& path, const ProgressCallback& progress = {},
                            const ReadLimits& limits = {});

/// @brief Parses a snapshot from bytes (compressed or not). `source` names it in errors.
/// @throws InputError as read_snapshot_file.
Snapshot parse_snapshot(std::span<const std::uint8_t> bytes, const std::string& source,
                        const ProgressCallback& progress = {}, const ReadLimits& limits = {});

}  // namespace fragscope::snapshot
