#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/json_output.h"
#include "cli/max_memory_option.h"
#include "cli/progress_bar.h"
#include "cli/text_output.h"
#include "diagnose/doctor.h"
#include "diagnose/doctor_inputs.h"
#include "report/doctor_report.h"
#include "report/traced_oom_words.h"
#include "util/output_file.h"

namespace fragscope::cli {
namespace {

struct DoctorFlags {
  std::vector<std::string> paths;
  bool json = false;
  std::string html;
  double wait_threshold = 0.10;
  unsigned threads = 0;
  snapshot::ReadLimits limits;
};

void run_doctor_command(const DoctorFlags& f, RunState& state) {
  ProgressBar bar(!state.quiet);
  const diagnose::DoctorInputs inputs = diagnose::collect_doctor_inputs(f.paths, f.limits, bar.progress());
  diagnose::DoctorOptions options;
  options.data_wait_threshold = f.wait_threshold;
  options.threads = f.threads;
  options.progress = bar.progress();
  options.word_traced_oom = report::traced_oom_words;
  const diagnose::Diagnosis diagnosis = diagnose::run_doctor(inputs, options);
  bar.close();
  if (!f.html.empty()) {
    std::ostringstream html;
    report::write_doctor_html(html, diagnosis);
    write_output_file(f.html, html.str(), inputs.files, "the HTML report");
  }
  if (f.json) {
    print_json(report::doctor_json(diagnosis), 1);
  } else {
    print_text([&](std::ostream& out) { report::write_doctor_text(out, diagnosis); });
  }
  state.exit_code = diagnose::exit_status(diagnosis.verdict);
}

}  // namespace

void add_doctor_command(CLI::App& app, RunState& state) {
  auto flags = std::make_shared<DoctorFlags>();
  auto* cmd = app.add_subcommand(
      "doctor", "Diagnose an OOM or a slow run from whatever you have (snapshots, steps.jsonl, memory_stats, "
                "nvidia-smi CSV, memory_summary, a log with the OOM message): verdict, evidence, ranked actions");
  cmd->add_option("PATH", flags->paths, "files or folders; each file is recognised by its content")
      ->type_name("PATH")
      ->required();
  cmd->add_flag("--json", flags->json, "print one JSON object instead of the text report");
  cmd->add_option("--html", flags->html, "also write a self-contained HTML report to FILE")->type_name("FILE");
  cmd->add_option("--wait-threshold", flags->wait_threshold,
                  "steady loader-wait share of step time that makes a run input-bound (default 0.10)")
      ->type_name("F")
      ->check(number_between(0.0, 1.0, "a share of the step time"));
  cmd->add_option("--threads", flags->threads, "what-if replay threads (default: all cores)")
      ->type_name("N")
      ->check(whole_number(1, kMaxThreads));
  add_max_memory_option(cmd, flags->limits);
  cmd->callback([flags, &state] { run_doctor_command(*flags, state); });
}

}  // namespace fragscope::cli
