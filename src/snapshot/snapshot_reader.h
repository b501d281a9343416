#pragma once
/// @file snapshot_reader.h
/// @brief Reads `torch.cuda.memory._dump_snapshot()` files safely: plain, gzip or zstd
/// (recognised by magic bytes, not by name), pickle protocols 2–5, modern and legacy layouts.
///
/// Never executes anything: opcodes that would import or call code (GLOBAL, STACK_GLOBAL,
/// REDUCE, BUILD, INST, OBJ, NEWOBJ, PERSID, ...) are refused with an InputError.

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "snapshot/byte_source.h"
#include "snapshot/snapshot.h"

namespace fragscope::snapshot {

/// @brief Called now and then while reading, and once at the end with done == total: bytes of
/// the pickle consumed and their total when the input says it up front (a plain file, a zstd
/// frame with its content size), else bytes of the file consumed and the file's size.
using ProgressCallback = std::function<void(std::uint64_t done, std::uint64_t total)>;

/// @brief Reads the snapshot file at `path`.
/// @throws InputError naming `path` when it is missing, unreadable, not a snapshot, corrupt,
///         truncated, hostile or too large.
Snapshot read_snapshot_file(const std::string& path, const ProgressCallback& progress = {});

/// @brief Parses a snapshot from bytes (compressed or not). `source` names it in errors.
/// @throws InputError as read_snapshot_file.
Snapshot parse_snapshot(std::span<const std::uint8_t> bytes, const std::string& source,
                        const ProgressCallback& progress = {});

/// @brief Reads a snapshot from an already opened (and, where needed, decompressing) source.
/// `name` names it in errors; `input_size` is the compressed size for progress (0 = unknown).
/// @throws InputError as read_snapshot_file.
Snapshot read_snapshot(ByteSource& source, const std::string& name, std::uint64_t input_size = 0,
                       const ProgressCallback& progress = {});

}  // namespace fragscope::snapshot
