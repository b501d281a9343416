#pragma once
/// @file telemetry_writer.h
/// @brief Writes step telemetry JSONL in the schema telemetry_reader.h reads (and the Python
/// hook writes): one compact JSON object per line, fixture fields first, in a fixed order.

#include <ostream>
#include <span>
#include <string>

#include "inputs/step_telemetry.h"

namespace fragscope::inputs {

/// @brief One record as a JSON object on one line, without the newline. Absent optional fields
/// are left out; `extra` fields are written back verbatim; `line` is not written.
std::string format_step_record(const StepRecord& record);

/// @brief Writes each record followed by '\n'.
void write_telemetry(std::ostream& out, std::span<const StepRecord> records);

}  // namespace fragscope::inputs
