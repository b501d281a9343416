#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/json_output.h"
#include "cli/text_output.h"
#include "inputs/acceptance_criteria.h"
#include "plan/canary_plan.h"
#include "plan/job_plan.h"
#include "plan/job_spec.h"
#include "report/plan_report.h"
#include "util/output_file.h"

namespace fragscope::cli {

namespace {

struct PlanOptions {
  std::string job;
  std::vector<std::string> overrides;
  bool json = false;
  bool propose = false;
  std::optional<std::uint64_t> global_batch;
  bool canary = false;
  std::string criteria_out;
  bool max_micro_batch = false;
};

void run_plan(const PlanOptions& o, RunState& state) {
  const plan::JobSpec spec = plan::read_job_spec(o.job, o.overrides);
  plan::PlanRequest request;
  request.propose = o.propose;
  request.global_batch = o.global_batch;
  request.canary = o.canary || !o.criteria_out.empty();
  request.largest_fit = o.max_micro_batch;
  if (!o.criteria_out.empty()) request.criteria_path = o.criteria_out;
  const plan::JobPlan job_plan = plan::plan_job(spec, request);
  if (!o.criteria_out.empty() && job_plan.canary) {
    std::ostringstream criteria;
    inputs::write_acceptance_criteria(criteria, job_plan.canary->criteria);
    const std::optional<FileIdentity> job = identity_of(o.job);
    write_output_file(o.criteria_out, criteria.str(), job ? std::span(&*job, 1) : std::span<const FileIdentity>{},
                      "the criteria file");
  }
  if (o.json) print_json(report::plan_json(spec, job_plan), 2);
  else print_text([&](std::ostream& out) { report::write_plan_text(out, spec, job_plan); });
  state.exit_code = job_plan.exit_status;
}

}  // namespace

void add_plan_command(CLI::App& app, RunState& state) {
  auto options = std::make_shared<PlanOptions>();
  auto* cmd = app.add_subcommand("plan", "Per-GPU memory of a training job from its TOML spec, replayed through the "
                                         "caching allocator: breakdown, verdict, proposals, canary plan (exit 1: not "
                                         "within the canary's limits)");
  cmd->add_option("JOB", options->job, "job spec (TOML; see docs/plan.md and examples/*.toml)")
      ->type_name("FILE")
      ->required();
  cmd->add_option("--set", options->overrides,
                  "override a spec key for a what-if, table.key=value (repeatable), e.g. --set "
                  "training.micro_batch_size=2 --set hardware.alloc_conf=expandable_segments:True")
      ->type_name("KEY=VALUE");
  cmd->add_flag("--json", options->json, "print one JSON object instead of the text report");
  cmd->add_flag("--propose", options->propose,
                "evaluate alternatives: checkpointing, micro-batch, allocator, optimizer, loss, offload, more GPUs, "
                "MIG");
  cmd->add_option("--global-batch", options->global_batch,
                  "target sequences per optimizer step for the proposals (implies --propose)")
      ->type_name("N")
      ->check(whole_number(1, 1'000'000'000));
  cmd->add_flag("--max-micro-batch", options->max_micro_batch,
                "find the largest micro_batch_size and seq_len that fit within the canary's HBM limit");
  cmd->add_flag("--canary", options->canary, "print the canary validation plan and its acceptance criteria");
  cmd->add_option("--criteria-out", options->criteria_out,
                  "write the acceptance criteria file for `fragscope check --criteria` (implies --canary)")
      ->type_name("FILE");
  cmd->callback([options, &state] { run_plan(*options, state); });
}

}  // namespace fragscope::cli
