#pragma once
/// @file job_plan.h
/// @brief Everything `fragscope plan` works out for one job, as asked: the estimate always, the
/// proposals when asked for, the canary plan when asked for, the largest micro-batch and
/// sequence length when asked for, and the verdict and exit status they imply. A canary of a
/// job that is not within the limits proves nothing, so it then validates the recommended change
/// (the proposals are worked out for it even when they are not asked for).
///
/// Exit status: 0 when the configuration the output tells the user to run — the one the canary
/// validates when a canary is asked for, else the job as specified — fits within the canary's
/// limits (kMaxHbmFraction of HBM, no allocator retries); 1 otherwise. With a canary asked for
/// and no configuration within the limits there is nothing to validate: no criteria to write.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plan/assumptions.h"
#include "plan/canary_plan.h"
#include "plan/job_spec.h"
#include "plan/memory_model.h"
#include "plan/proposals.h"

namespace fragscope::plan {

struct PlanRequest {
  bool propose = false;                         ///< evaluate the alternatives
  std::optional<std::uint64_t> global_batch;    ///< their target global batch (implies propose)
  bool canary = false;                          ///< plan the canary run
  std::string criteria_path = "criteria.json";  ///< where the canary's criteria file goes
  bool largest_fit = false;                     ///< find the largest micro-batch and seq_len that fit
};

struct JobPlan {
  MemoryEstimate estimate;              ///< the job as specified
  std::vector<Assumption> assumptions;  ///< of the job as specified
  std::vector<std::string> warnings;
  std::optional<ProposalSet> proposals;  ///< when asked for (propose or global_batch)
  std::optional<CanaryPlan> canary;      ///< when asked for and some configuration is within the limits
  std::optional<LargestFit> largest;     ///< when asked for
  std::string verdict;                   ///< one line: FITS / … / DOES NOT FIT, with the figures
  int exit_status = 1;                   ///< see the file comment
};

/// @brief Plans `spec` as `request` asks.
JobPlan plan_job(const JobSpec& spec, const PlanRequest& request);

/// @brief The verdict line of an estimate ("FITS: peak reserved 36.43 GiB, 25.9% of the device…").
std::string verdict_text(const MemoryEstimate& e);

}  // namespace fragscope::plan
