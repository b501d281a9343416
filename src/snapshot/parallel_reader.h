#pragma once
/// @file parallel_reader.h
/// @brief Reads a large snapshot on several threads, into the same model as the one-thread
/// reader, byte for byte.
///
/// How: a walk of the stream (pickle_splitter.h) finds where parts can start (a trace entry)
/// and the memo entries before each. Each part is parsed on its own thread by its own machine
/// and builder, from its own source opened at its start; what it cannot know alone (memo entries
/// of earlier parts: frames, frames lists, names, actions) it leaves as references. The main
/// machine parses the start of the stream; where a part starts, it pauses, checks the part
/// against its own state (same offset, same memo size, every reference resolvable, every logged
/// MARK and APPENDS valid here) and takes it over: strings, frames, stacks and events in their
/// order (so ids are the same), memo entries (objects made only if referenced), and the part's
/// top-level values (a run of events is one list item). A part that fails any check, or fails
/// in any way, is dropped and the main machine reads its bytes itself: errors, and everything
/// else, are exactly the one-thread reader's. The limits (read_limits.h) hold the same way: each
/// part may hold a share of max_memory (a part over it is read by the main machine instead), and
/// the main machine counts what it took over.
/// Thread-safety: one call per thread; it starts and joins its own threads.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "snapshot/byte_source.h"
#include "snapshot/progress_callback.h"
#include "snapshot/read_limits.h"
#include "snapshot/snapshot.h"

namespace fragscope::snapshot {

/// @brief Opens the (decompressed) stream from byte `offset` on: a new source at each call.
using OpenSourceAt = std::function<std::unique_ptr<ByteSource>(std::uint64_t offset)>;

/// @brief How many parts to read `stream_bytes` of pickle in: 1 (one thread) below 32 MiB or
/// on fewer than 4 cores, else up to 8; FRAGSCOPE_READER_PARTS (1 to 64) overrides.
unsigned reader_parts(std::uint64_t stream_bytes);

/// @brief Reads up to out.size() bytes of the stream at `offset`; returns how many.
using ReadAt = std::function<std::size_t(std::uint64_t offset, std::span<std::uint8_t> out)>;

/// @brief What a read in parts did, for tests and benchmarks.
struct PartsTaken {
  std::size_t parts = 0;  ///< parts planned (regions after the first)
  std::size_t taken = 0;  ///< parts parsed apart and taken over (the rest were read in line)
};

/// @brief Reads the uncompressed snapshot stream that `open_at` opens (and `read_at` reads
/// anywhere) in `parts` parts (2 or more); one part when it is not framed throughout.
/// @param name names the input in errors; @param input_size the file's size, for progress.
/// @throws InputError as read_snapshot_file, with the same messages.
Snapshot read_snapshot_in_parts(const OpenSourceAt& open_at, const ReadAt& read_at, const std::string& name,
                                std::uint64_t input_size, const ProgressCallback& progress, unsigned parts,
                                PartsTaken* taken = nullptr, const ReadLimits& limits = {});

}  // namespace fragscope::snapshot
