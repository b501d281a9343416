#pragma once
/// @file memory_stats_reader.h
/// @brief Reads `torch.cuda.memory_stats()` saved as JSON (`json.dump(torch.cuda.memory_stats())`).
///
/// Accepts the flat form PyTorch returns ({"reserved_bytes.all.peak": 52865007616, ...}) and the
/// nested form of `torch.cuda.memory_stats_as_nested_dict()` ({"reserved_bytes": {"all":
/// {"peak": ...}}}), which is flattened to the same dotted keys. Values must be integers.

#include <filesystem>
#include <string_view>

#include "inputs/memory_stats.h"

namespace fragscope::inputs {

/// @brief Parses memory_stats JSON text; `source` names it in errors.
/// @throws InputError "SOURCE: ..." on invalid JSON, a non-object document, a non-integer value
/// (naming its key) or a document with no memory_stats key at all.
MemoryStats parse_memory_stats(std::string_view json_text, std::string_view source);

/// @brief Reads and parses the file at `path`.
/// @throws InputError naming `path` when unreadable or invalid.
MemoryStats read_memory_stats_file(const std::filesystem::path& path);

}  // namespace fragscope::inputs
