#pragma once
/// @file analyze_report.h
/// @brief `fragscope analyze` output: a text report a person reads in ten seconds, and the
/// same content as one JSON object. docs/analyze.md explains every line.

#include <ostream>

#include <nlohmann/json.hpp>

#include "metrics/snapshot_analysis.h"

namespace fragscope::report {

struct AnalyzeTextOptions {
  std::size_t map_rows = 16;   ///< segment-map rows drawn (largest segments); 0 = all
  std::size_t map_width = 64;  ///< characters per row
};

/// @brief Writes the text report of `analysis` for `source` (the file name) to `out`.
void write_analyze_text(std::ostream& out, const metrics::SnapshotAnalysis& analysis, const std::string& source,
                        const AnalyzeTextOptions& options);

/// @brief The JSON form. Byte counts are integers; keys documented in docs/analyze.md.
nlohmann::json analyze_json(const metrics::SnapshotAnalysis& analysis, const std::string& source);

}  // namespace fragscope::report
