#pragma once
/// @file telemetry_reader.h
/// @brief Reads step telemetry JSONL (one StepRecord per line; see step_telemetry.h).
///
/// Blank lines are skipped. Every other line must be one JSON object with an integer `step`;
/// known fields must have their documented types; unknown fields are kept verbatim.

#include <filesystem>
#include <istream>
#include <string_view>
#include <vector>

#include "inputs/step_telemetry.h"

namespace fragscope::inputs {

/// @brief Parses one line. `source` and `line` name it in errors.
/// @throws InputError "SOURCE:LINE: ..." (invalid JSON, not an object, missing `step`, a field
/// of the wrong type — naming the field).
StepRecord parse_step_record(std::string_view json_line, std::string_view source, std::size_t line);

/// @brief Reads every record of `in` in order; records keep their line numbers.
/// @throws InputError "SOURCE:LINE: ..." at the first bad line, or "SOURCE: no telemetry
/// records" when there is none.
std::vector<StepRecord> read_telemetry(std::istream& in, std::string_view source);

/// @brief Reads the JSONL file at `path`.
/// @throws InputError naming `path` (unreadable, or as read_telemetry).
std::vector<StepRecord> read_telemetry_file(const std::filesystem::path& path);

}  // namespace fragscope::inputs
