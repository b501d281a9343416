#include "plan/job_plan.h"

#include <fmt/format.h>

#include "alloc/device_memory.h"
#include "util/bytes.h"
#include "util/error.h"

namespace fragscope::plan {

std::string verdict_text(const MemoryEstimate& e) {
  const std::string peak = fmt::format("peak reserved {} ({} of the {} device)", format_bytes(e.peak_reserved_bytes),
                                       percent_text(e.hbm_fraction()), format_bytes(e.device_bytes));
  if (!e.fits)
    return fmt::format("DOES NOT FIT: out of memory in the {} (asking for {}); it needs {}, {} more than the usable {}",
                       moment_text(e.oom_at), format_bytes(e.oom_request_bytes), peak,
                       format_bytes(e.unconstrained_reserved_bytes - e.usable_bytes), format_bytes(e.usable_bytes));
  if (e.cache_trimmed)
    return fmt::format(
        "FITS ONLY BY FREEING THE ALLOCATOR'S CACHE: its cache would grow to {}, {} more than the usable "
        "{}; on the device the allocator frees cached blocks{} ({}), which slows the steps{}",
        format_bytes(e.unconstrained_reserved_bytes), format_bytes(e.unconstrained_reserved_bytes - e.usable_bytes),
        format_bytes(e.usable_bytes),
        e.num_alloc_retries ? fmt::format(" and {} malloc{} flush it whole and retry", e.num_alloc_retries,
                                          e.num_alloc_retries == 1 ? "" : "s")
                            : "",
        peak, e.num_alloc_retries ? " (the canary allows no retry)" : "");
  if (!e.within_hbm_limit)
    return fmt::format("FITS ABOVE THE CANARY'S LIMIT: {}, over the canary's {}; {} to spare in the usable {}", peak,
                       percent_text(kMaxHbmFraction), format_bytes(static_cast<std::uint64_t>(e.margin_bytes)),
                       format_bytes(e.usable_bytes));
  return fmt::format("FITS: {}, within the canary's {}; {} to spare in the usable {}", peak,
                     percent_text(kMaxHbmFraction), format_bytes(static_cast<std::uint64_t>(e.margin_bytes)),
                     format_bytes(e.usable_bytes));
}

namespace {

JobPlan plan_within_address_space(const JobSpec& spec, const PlanRequest& request) {
  JobPlan plan;
  plan.estimate = estimate_memory(spec);
  plan.assumptions = assumptions(spec);
  plan.warnings = warnings(spec);
  plan.verdict = verdict_text(plan.estimate);
  const bool proposals_asked = request.propose || request.global_batch.has_value();
  std::optional<ProposalSet> proposals;
  if (proposals_asked || (request.canary && !plan.estimate.within_hbm_limit))
    proposals = propose(spec, plan.estimate, request.global_batch);
  bool runnable_ok = plan.estimate.within_hbm_limit;
  if (request.canary) {
    const Proposal* change =
        proposals && proposals->recommended ? &proposals->proposals[*proposals->recommended] : nullptr;
    const bool job_ok = plan.estimate.within_hbm_limit && !(proposals && change);
    if (change || job_ok) {
      plan.canary = canary_plan(change ? change->spec : spec, change ? change->estimate : plan.estimate,
                                request.criteria_path, change ? change->change : std::string());
      runnable_ok = true;
    } else {
      runnable_ok = false;
    }
  }
  if (proposals_asked) plan.proposals = std::move(proposals);
  if (request.largest_fit) plan.largest = largest_fit(spec);
  plan.exit_status = runnable_ok ? 0 : 1;
  return plan;
}

}  // namespace

JobPlan plan_job(const JobSpec& spec, const PlanRequest& request) {
  try {
    return plan_within_address_space(spec, request);
  } catch (const alloc::AddressSpaceExhausted& e) {  // a spec of absurd sizes: its input's fault, said so
    throw InputError(fmt::format("{}: {}", spec.source, e.what()));
  }
}

}  // namespace fragscope::plan
