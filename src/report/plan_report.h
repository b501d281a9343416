#pragma once
/// @file plan_report.h
/// @brief `fragscope plan` output: the job and what the plan assumes, a per-GPU table that
/// explains every figure (in the manner of tcmalloc's stats page), the verdict, the proposals
/// table, the largest micro-batch and sequence length that fit, the canary plan; and the same as
/// one JSON object. Every percentage of HBM is peak reserved / device memory, printed by
/// plan::percent_text, so no printed number contradicts another (docs/plan.md lists each line
/// and key).

#include <ostream>

#include <nlohmann/json.hpp>

#include "plan/job_plan.h"
#include "plan/job_spec.h"

namespace fragscope::report {

/// @brief The plan as text.
void write_plan_text(std::ostream& out, const plan::JobSpec& spec, const plan::JobPlan& plan);

/// @brief The plan as one JSON object (`plan --json` prints it with a two-space indent).
nlohmann::ordered_json plan_json(const plan::JobSpec& spec, const plan::JobPlan& plan);

}  // namespace fragscope::report
