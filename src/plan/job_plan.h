#pragma once
/// @file job_plan.h
/// @brief Everything `fragscope plan` works out for one job, as asked: the estimate always, the
/// proposals when asked for, the canary plan when asked for. A canary of a job that cannot fit
/// proves nothing, so it then validates the recommended change (the proposals are worked out
/// for it even when they are not asked for).

#include <cstdint>
#include <optional>
#include <string>

#include "plan/canary_plan.h"
#include "plan/job_spec.h"
#include "plan/memory_model.h"
#include "plan/proposals.h"

namespace fragscope::plan {

struct PlanRequest {
  bool propose = false;                       ///< evaluate the alternatives
  std::optional<std::uint64_t> global_batch;  ///< their target global batch (implies propose)
  bool canary = false;                        ///< plan the canary run
  std::string criteria_path = "criteria.json";  ///< where the canary's criteria file goes
};

struct JobPlan {
  MemoryEstimate estimate;                 ///< the job as specified
  std::optional<ProposalSet> proposals;    ///< when asked for (propose or global_batch)
  std::optional<CanaryPlan> canary;        ///< when asked for
};

/// @brief Plans `spec` as `request` asks.
JobPlan plan_job(const JobSpec& spec, const PlanRequest& request);

}  // namespace fragscope::plan
