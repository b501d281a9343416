#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/json_output.h"
#include "cli/text_output.h"
#include "diagnose/acceptance_check.h"
#include "inputs/acceptance_criteria.h"
#include "report/acceptance_report.h"

namespace fragscope::cli {

namespace {

struct CheckOptions {
  std::vector<std::string> telemetry;
  std::string criteria;
  std::vector<std::string> smi;
  bool json = false;
  bool allow_unevaluated = false;
};

void run_check(const CheckOptions& o, RunState& state) {
  const inputs::AcceptanceCriteria criteria =
      o.criteria.empty() ? inputs::AcceptanceCriteria{} : inputs::read_acceptance_criteria_file(o.criteria);
  const std::string criteria_source = o.criteria.empty() ? "defaults (no --criteria)" : o.criteria;
  const diagnose::CheckReport report =
      diagnose::check_acceptance(criteria, diagnose::read_check_input(o.telemetry, o.smi), o.allow_unevaluated);
  if (o.json) {
    print_json(report::check_json(report, criteria, criteria_source), 2);
  } else {
    print_text([&](std::ostream& out) { report::write_check_table(out, report, criteria_source); });
  }
  state.exit_code = report.passed() ? 0 : 1;
}

}  // namespace

void add_check_command(CLI::App& app, RunState& state) {
  auto options = std::make_shared<CheckOptions>();
  auto* cmd = app.add_subcommand("check", "Check a canary run's telemetry (every rank) against acceptance "
                                          "criteria; exit 0 only when all pass");
  cmd->add_option("TELEMETRY", options->telemetry,
                  "step telemetry JSONL: one file per rank (in rank order), or files with a rank field")
      ->type_name("FILE")
      ->required();
  cmd->add_option("--criteria", options->criteria,
                  "acceptance criteria JSON (fragscope plan --canary); defaults when omitted")
      ->type_name("FILE");
  cmd->add_option("--smi", options->smi,
                  "nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used,memory.total "
                  "--format=csv -lms 100 output: GPU idle and device memory")
      ->type_name("FILE");
  cmd->add_flag("--json", options->json, "print one JSON object (for CI) instead of the table");
  cmd->add_flag("--allow-unevaluated", options->allow_unevaluated,
                "pass even when a criterion cannot be evaluated from the data (by default that fails the check)");
  cmd->callback([options, &state] { run_check(*options, state); });
}

}  // namespace fragscope::cli
