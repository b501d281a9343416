#pragma once
/// @file canary_plan.h
/// @brief What to run before committing the long job: an instrumented short run with the real
/// sequence-length distribution, then one that also saves a checkpoint and evaluates, and the
/// acceptance criteria `fragscope check` evaluates on their telemetry.
///
/// The criteria file is the shared format of docs/criteria.md (version 1); its defaults are the
/// issue's: no rank above 90% of HBM, GPU idle and data wait below 10%, no OOM across train,
/// eval and checkpoint, no allocator retries, step time and throughput spread below 15%.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "plan/job_spec.h"
#include "plan/memory_model.h"

namespace fragscope::plan {

struct AcceptanceCriteria {
  int version = 1;
  std::uint64_t device_memory_bytes = 0;  ///< the card's (or MIG slice's) memory
  double max_hbm_fraction = kMaxHbmFraction;
  double max_data_wait_fraction = 0.10;
  double max_gpu_idle_fraction = 0.10;
  bool allow_oom = false;
  std::uint64_t max_alloc_retries = 0;
  std::vector<std::string> required_phases{"train", "eval", "checkpoint"};
  double max_step_time_spread = 0.15;
  double max_throughput_spread = 0.15;
  std::uint64_t warmup_steps = 2;
};

struct CanaryStep {
  std::string title;
  std::string detail;
};

struct CanaryPlan {
  std::vector<CanaryStep> steps;
  AcceptanceCriteria criteria;
  std::uint64_t micro_steps = 0;           ///< length of each canary run, in micro-steps
  double predicted_hbm_fraction = 0;       ///< predicted peak reserved / device memory
};

/// @brief The canary plan for `spec`, whose estimate is `estimate`.
/// @param criteria_path where the criteria file will be written (quoted in the commands).
/// @param change the edit to apply before the canary (the recommended proposal when the job as
/// specified does not fit); empty for none. `spec` and `estimate` are the job with it applied.
CanaryPlan canary_plan(const JobSpec& spec, const MemoryEstimate& estimate, const std::string& criteria_path,
                       const std::string& change = {});

/// @brief Writes the criteria as one JSON object with every key (docs/criteria.md).
void write_criteria_json(std::ostream& out, const AcceptanceCriteria& criteria);

}  // namespace fragscope::plan
