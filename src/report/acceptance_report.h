#pragma once
/// @file acceptance_report.h
/// @brief Renders a CheckReport: a table for people, JSON for CI.

#include <ostream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "diagnose/acceptance_check.h"
#include "inputs/acceptance_criteria.h"

namespace fragscope::report {

/// @brief One row per rank (or GPU) and criterion: subject, criterion, measured, limit, result,
/// detail; then the warnings ("warning: …") and a one-line verdict. `criteria_source` says
/// where the limits came from.
void write_check_table(std::ostream& out, const diagnose::CheckReport& report, std::string_view criteria_source);

/// @brief {"passed", "failed", "not_evaluated", "allow_unevaluated", "criteria_source", "warnings": [...],
/// "criteria": {every key},
/// "results": [{"subject", "rank"?, "criterion", "verdict": "pass"|"fail"|"not_evaluated",
/// "measured"?, "limit"?, "measured_text", "limit_text", "detail"}]}.
nlohmann::ordered_json check_json(const diagnose::CheckReport& report, const inputs::AcceptanceCriteria& criteria,
                                  std::string_view criteria_source);

}  // namespace fragscope::report
