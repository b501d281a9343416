#pragma once
/// @file canary_plan.h
/// @brief What to run before committing the long job: an instrumented short run with the real
/// sequence-length distribution, then one that also saves a checkpoint and evaluates, and the
/// acceptance criteria `fragscope check` evaluates on their telemetry; the predicted peak with
/// the tolerance the model's accuracy allows, and the plan's assumptions to verify.
///
/// The criteria are the shared file format of inputs/acceptance_criteria.h (docs/criteria.md):
/// no rank above 90% of the planned device's HBM, GPU idle and data wait below 10%, no OOM across
/// train, eval and checkpoint, no allocator retries, and step-time and throughput spreads that
/// suit the job: 15% for fixed lengths (noise), and for variable lengths the spread the length
/// distribution itself causes (a seeded draw of optimizer steps through the throughput model's
/// per-token costs) plus the same 15%.
/// Thread-safety: pure functions.

#include <cstdint>
#include <string>
#include <vector>

#include "inputs/acceptance_criteria.h"
#include "plan/job_spec.h"
#include "plan/memory_model.h"

namespace fragscope::plan {

/// The spread that step times of fixed-length micro-steps show from noise alone.
inline constexpr double kNoiseSpread = 0.15;
/// How far the canary's measured peak reserved may be from the prediction before the plan's
/// assumptions are in doubt (the replay is within 0.03% on every recorded H200 shape).
inline constexpr double kPeakReservedTolerance = 0.03;

struct CanaryStep {
  std::string title;
  std::string detail;
};

struct CanaryPlan {
  std::vector<CanaryStep> steps;
  inputs::AcceptanceCriteria criteria;
  std::uint64_t micro_steps = 0;  ///< length of each canary run: whole optimizer steps
  std::uint64_t optimizer_steps = 0;
  std::uint64_t predicted_peak_reserved_bytes = 0;
  double predicted_hbm_fraction = 0;  ///< predicted peak reserved / device memory
  double peak_reserved_tolerance = kPeakReservedTolerance;
  double predicted_step_time_spread = 0;  ///< what the lengths alone cause (0 for fixed lengths)
  double predicted_throughput_spread = 0;
  std::string change;  ///< the change the canary validates (empty: the job as specified)
};

/// @brief The canary plan for `spec`, whose estimate is `estimate`.
/// @param criteria_path where the criteria file will be written (quoted in the commands).
/// @param change the edit applied before the canary (the recommended proposal when the job as
/// specified is not within the limit); empty for none. `spec` and `estimate` include it.
CanaryPlan canary_plan(const JobSpec& spec, const MemoryEstimate& estimate, const std::string& criteria_path,
                       const std::string& change = {});

/// @brief (p90 − p10) / median of the step time and of samples/s over `optimizer_steps` drawn
/// optimizer steps of `spec` (0, 0 for fixed lengths); fewer, at least 8, where they would pass
/// 2^23 micro-steps (grad_accum above 2048).
std::pair<double, double> length_spreads(const JobSpec& spec, std::size_t optimizer_steps = 4096);

}  // namespace fragscope::plan
