#pragma once
/// @file canary_plan.h
/// @brief What to run before committing the long job: an instrumented short run with the real
/// sequence-length distribution, then one that also saves a checkpoint and evaluates, and the
/// acceptance criteria `fragscope check` evaluates on their telemetry.
///
/// The criteria are the shared file format of inputs/acceptance_criteria.h (docs/criteria.md);
/// their defaults are the issue's: no rank above 90% of HBM, GPU idle and data wait below 10%,
/// no OOM across train, eval and checkpoint, no allocator retries, step time and throughput
/// spread below 15%.

#include <cstdint>
#include <string>
#include <vector>

#include "inputs/acceptance_criteria.h"
#include "plan/job_spec.h"
#include "plan/memory_model.h"

namespace fragscope::plan {

struct CanaryStep {
  std::string title;
  std::string detail;
};

struct CanaryPlan {
  std::vector<CanaryStep> steps;
  inputs::AcceptanceCriteria criteria;
  std::uint64_t micro_steps = 0;           ///< length of each canary run, in micro-steps
  double predicted_hbm_fraction = 0;       ///< predicted peak reserved / device memory
};

/// @brief The canary plan for `spec`, whose estimate is `estimate`.
/// @param criteria_path where the criteria file will be written (quoted in the commands).
/// @param change the edit to apply before the canary (the recommended proposal when the job as
/// specified does not fit); empty for none. `spec` and `estimate` are the job with it applied.
CanaryPlan canary_plan(const JobSpec& spec, const MemoryEstimate& estimate, const std::string& criteria_path,
                       const std::string& change = {});

}  // namespace fragscope::plan
