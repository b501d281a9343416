#pragma once
/// @file telemetry_reader.h
/// @brief Reads step telemetry JSONL (one StepRecord per line; see step_telemetry.h).
///
/// Blank lines are skipped. Every other line must be one JSON object with an integer `step`;
/// known fields must have their documented types; unknown fields are kept verbatim. The last
/// line may be cut off (no '\n', its JSON ends too soon): the writer died mid-line, the normal
/// end of a crashed job; it is left out and noted. Files are streamed: memory holds the records and one
/// line (at most kMaxTelemetryLineBytes); a file may hold at most kMaxTelemetryBytes (text_file.h).
///
/// The records may hold at most kTelemetryMemoryPerByte bytes of memory per byte of line read, plus
/// kTelemetryMemoryFloor, as telemetry_footprint() (step_telemetry.h) counts them, or the read stops
/// with a line naming the file and line. A record takes sizeof(StepRecord) however short its line:
/// 1 GiB of `{"step":0}` lines would hold 18 GB. Lines of 48 bytes or more fit however many, unless
/// most of their bytes are short unknown fields (`"a":1,` costs 40); the hook's (~530 bytes) hold 0.67
/// bytes per byte, so a 1 GiB steps.jsonl of a long job is read in less than its size.

#include <cstdint>
#include <filesystem>
#include <istream>
#include <optional>
#include <string_view>
#include <vector>

#include "inputs/step_telemetry.h"
#include "util/bytes.h"

namespace fragscope::inputs {

inline constexpr std::uint64_t kTelemetryMemoryPerByte = 4;
inline constexpr std::uint64_t kTelemetryMemoryFloor = 64 * kMiB;

/// @brief Parses one line. `source` and `line` name it in errors.
/// @throws InputError "SOURCE:LINE: ..." (invalid JSON, not an object, missing `step`, a field
/// of the wrong type — naming the field, a `phase` that phase_name_problem refuses, an optional integer
/// field of -2^63: the value that means absent, packed_optional.h).
StepRecord parse_step_record(std::string_view json_line, std::string_view source, std::size_t line);

/// @brief What a read left out, for the reports.
struct TelemetryNotes {
  std::optional<std::size_t> cut_last_line;  ///< the cut-off last line, left out
};

/// @brief Reads every record of `in` in order; records keep their line numbers.
/// @throws InputError "SOURCE:LINE: ..." at the first bad line (but a cut last line) and at the line
/// whose records take more memory than the lines read allow, or "SOURCE: no telemetry records" when
/// there is none.
std::vector<StepRecord> read_telemetry(std::istream& in, std::string_view source, TelemetryNotes* notes = nullptr);

/// @brief Reads the JSONL file at `path` (a regular file or a pipe).
/// @throws InputError naming `path` (unreadable, a special file, too large, or as read_telemetry).
std::vector<StepRecord> read_telemetry_file(const std::filesystem::path& path, TelemetryNotes* notes = nullptr);

}  // namespace fragscope::inputs
