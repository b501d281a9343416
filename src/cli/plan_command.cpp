#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "inputs/acceptance_criteria.h"
#include "plan/canary_plan.h"
#include "plan/job_plan.h"
#include "plan/job_spec.h"
#include "report/plan_report.h"
#include "util/error.h"

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
  plan::PlanRequest request;
  request.propose = o.propose;
  request.global_batch = o.global_batch;
  request.canary = o.canary || !o.criteria_out.empty();
  if (!o.criteria_out.empty()) request.criteria_path = o.criteria_out;
  const plan::JobPlan job_plan = plan::plan_job(spec, request);
  if (!o.criteria_out.empty()) {
    std::ofstream file(o.criteria_out);
    if (!file) throw InputError(fmt::format("{}: cannot write the criteria file", o.criteria_out));
    inputs::write_acceptance_criteria(file, job_plan.canary->criteria);
    if (!file) throw InputError(fmt::format("{}: write failed", o.criteria_out));
  }
  const plan::ProposalSet* proposals = job_plan.proposals ? &*job_plan.proposals : nullptr;
  const plan::CanaryPlan* canary = job_plan.canary ? &*job_plan.canary : nullptr;
  if (o.json) report::write_plan_json(std::cout, spec, job_plan.estimate, proposals, canary);
  else report::write_plan_text(std::cout, spec, job_plan.estimate, proposals, canary);
  state.exit_code = job_plan.estimate.fits ? 0 : 1;
}

}  // namespace

void add_plan_command(CLI::App& app, RunState& state) {
  auto options = std::make_shared<PlanOptions>();
  auto* cmd = app.add_subcommand("plan", "Per-GPU memory of a training job from its TOML spec: breakdown, "
                                         "fits or not, proposals, canary plan (exit 1: does not fit)");
  cmd->add_option("JOB", options->job, "job spec (TOML; see docs/plan.md and examples/*.toml)")
      ->type_name("FILE")
      ->required();
  cmd->add_flag("--json", options->json, "print one JSON object instead of the text report");
  cmd->add_flag("--propose", options->propose,
                "evaluate alternatives: checkpointing, micro-batch, more GPUs, MIG slices, expandable_segments");
  cmd->add_option("--global-batch", options->global_batch,
                  "target sequences per optimizer step for the proposals (implies --propose)")
      ->type_name("N")
      ->check(whole_number(1, 1'000'000'000));
  cmd->add_flag("--canary", options->canary, "print the canary validation plan and its acceptance criteria");
  cmd->add_option("--criteria-out", options->criteria_out,
                  "write the acceptance criteria file for `fragscope check --criteria` (implies --canary)")
      ->type_name("FILE");
  cmd->callback([options, &state] { run_plan(*options, state); });
}

}  // namespace fragscope::cli
