#include "plan/job_plan.h"

namespace fragscope::plan {

JobPlan plan_job(const JobSpec& spec, const PlanRequest& request) {
  JobPlan plan;
  plan.estimate = estimate_memory(spec);
  const bool proposals_asked = request.propose || request.global_batch.has_value();
  std::optional<ProposalSet> proposals;
  if (proposals_asked || (request.canary && !plan.estimate.within_hbm_limit))
    proposals = propose(spec, request.global_batch);
  if (request.canary) {
    const Proposal* change =
        proposals && proposals->recommended ? &proposals->proposals[*proposals->recommended] : nullptr;
    plan.canary = canary_plan(change ? change->spec : spec, change ? change->estimate : plan.estimate,
                              request.criteria_path, change ? change->change : std::string());
  }
  if (proposals_asked) plan.proposals = std::move(proposals);
  return plan;
}

}  // namespace fragscope::plan
