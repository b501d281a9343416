#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <sstream>

#include "cli/commands.h"
#include "plan/canary_plan.h"
#include "plan/job_spec.h"
#include "plan/memory_model.h"
#include "plan/proposals.h"
#include "report/plan_report.h"
#include "util/output_file.h"

namespace fragscope::cli {

namespace {

struct PlanOptions {
  std::string job;
  bool json = false;
  bool propose = false;
  std::optional<std::uint64_t> global_batch;
  bool canary = false;
  std::string criteria_out;
};

void run_plan(const PlanOptions& o, RunState& state) {
  const plan::JobSpec spec = plan::read_job_spec(o.job);
  const plan::MemoryEstimate estimate = plan::estimate_memory(spec);
  const bool want_canary = o.canary || !o.criteria_out.empty();
  std::optional<plan::ProposalSet> proposals;
  if (o.propose || o.global_batch || (want_canary && !estimate.within_hbm_limit))
    proposals = plan::propose(spec, o.global_batch);
  std::optional<plan::CanaryPlan> canary;
  if (want_canary) {
    // A canary of a job that cannot fit proves nothing: validate the recommended change instead.
    const plan::Proposal* change =
        proposals && proposals->recommended ? &proposals->proposals[*proposals->recommended] : nullptr;
    canary = plan::canary_plan(change ? change->spec : spec, change ? change->estimate : estimate,
                               o.criteria_out.empty() ? "criteria.json" : o.criteria_out,
                               change ? change->change : std::string());
    if (!o.criteria_out.empty()) {
      std::ostringstream criteria;
      inputs::write_acceptance_criteria(criteria, canary->criteria);
      const std::optional<FileIdentity> job = identity_of(o.job);
      write_output_file(o.criteria_out, criteria.str(), job ? std::span(&*job, 1) : std::span<const FileIdentity>{},
                        "the criteria file");
    }
  }
  const plan::ProposalSet* p = proposals && (o.propose || o.global_batch) ? &*proposals : nullptr;
  const plan::CanaryPlan* c = canary ? &*canary : nullptr;
  if (o.json) report::write_plan_json(std::cout, spec, estimate, p, c);
  else report::write_plan_text(std::cout, spec, estimate, p, c);
  state.exit_code = estimate.fits ? 0 : 1;
}

}  // namespace

void add_plan_command(CLI::App& app, RunState& state) {
  auto options = std::make_shared<PlanOptions>();
  auto* cmd = app.add_subcommand("plan", "Per-GPU memory of a training job from its TOML spec: breakdown, "
                                         "fits or not, proposals, canary plan (exit 1: does not fit)");
  cmd->add_option("JOB", options->job, "job spec (TOML; see docs/plan.md and examples/*.toml)")->required();
  cmd->add_flag("--json", options->json, "print one JSON object instead of the text report");
  cmd->add_flag("--propose", options->propose,
                "evaluate alternatives: checkpointing, micro-batch, more GPUs, MIG slices, expandable_segments");
  cmd->add_option("--global-batch", options->global_batch,
                  "target sequences per optimizer step for the proposals (implies --propose)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--canary", options->canary, "print the canary validation plan and its acceptance criteria");
  cmd->add_option("--criteria-out", options->criteria_out,
                  "write the acceptance criteria file for `fragscope check --criteria` (implies --canary)");
  cmd->callback([options, &state] { run_plan(*options, state); });
}

}  // namespace fragscope::cli
