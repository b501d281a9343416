#include <fmt/format.h>

#include "report/doctor_report.h"
#include "util/bytes.h"
#include "util/shown_text.h"

namespace fragscope::report {
namespace {

void field(std::ostream& out, std::string_view name, std::string_view value) {
  if (!value.empty()) out << fmt::format("{:<11}{}\n", name, value);
}

void actions(std::ostream& out, std::string_view title, const std::vector<diagnose::Action>& list, bool numbered) {
  if (list.empty()) return;
  out << '\n' << title << '\n';
  for (std::size_t i = 0; i < list.size(); ++i) {
    const diagnose::Action& a = list[i];
    const std::string mark = numbered ? fmt::format("{}.", i + 1) : std::string("-");
    out << fmt::format("  {} {}{}\n", mark, a.title,
                       numbered && !a.sufficient ? " (not shown to be enough on its own)" : "");
    if (!a.setting.empty()) out << fmt::format("     {}\n", a.setting);
    if (!a.evidence.empty()) out << fmt::format("     why: {}\n", a.evidence);
  }
}

void lines(std::ostream& out, std::string_view title, const std::vector<std::string>& list) {
  if (list.empty()) return;
  out << '\n' << title << '\n';
  for (const std::string& line : list) out << "  - " << line << '\n';
}

std::vector<std::string> skipped_lines(const diagnose::Diagnosis& d) {
  std::vector<std::string> out;
  for (const auto& [path, reason] : d.skipped_inputs)
    out.push_back(fmt::format("{}: {}", shown_name(path, kShownPathBytes), reason));
  return out;
}

std::string projected_step(const diagnose::WhatIfLine& w) {
  if (!w.runs_projected_step) return "";
  return *w.runs_projected_step ? "runs it" : "OOM";
}

}  // namespace

std::string whatif_at_capacity(const diagnose::WhatIfLine& w) {
  if (!w.passes_oom_point) return "-";
  if (w.oom_event) return fmt::format("OOM at event {}", *w.oom_event);
  return w.fits.value_or(false) ? "fits" : "fits (passes the OOM)";
}

void write_doctor_text(std::ostream& out, const diagnose::Diagnosis& d) {
  out << fmt::format("fragscope doctor · verdict: {}\n{}\n\n", diagnose::to_string(d.verdict), d.headline);
  for (const std::string& w : d.warnings) out << "warning: " << w << '\n';
  if (!d.warnings.empty()) out << '\n';
  field(out, "phase", d.phase_source.empty() ? d.phase : fmt::format("{} ({})", d.phase, d.phase_source));
  field(out, "trigger", d.trigger);
  if (d.data_wait_fraction)
    field(out, "data wait",
          fmt::format("{:.1f}% of step time ({:.1f}% at steady state)", 100 * *d.data_wait_fraction,
                      100 * d.steady_data_wait_fraction.value_or(*d.data_wait_fraction)));
  if (d.gpu_idle_fraction)
    field(out, "gpu idle", fmt::format("{:.1f}% of nvidia-smi samples", 100 * *d.gpu_idle_fraction));
  if (d.capacity_bytes)
    field(out, "capacity", fmt::format("{} ({})", format_bytes(*d.capacity_bytes), d.capacity_source));
  if (const diagnose::TraceStepProjection& t = d.trace_projection; t.available && t.from_training_call)
    field(out, "projected",
          fmt::format("{} peak for the eval batch with perfect packing, at least {} (from training call {} of {} "
                      "of {}, sizes ×{:.3f})",
                      format_bytes(t.most_peak_bytes), format_bytes(t.least_peak_bytes), t.reference_unit,
                      t.earlier_units, t.shared_function, t.scale));
  else if (t.available)
    field(out, "projected",
          fmt::format("{} peak for the failing step with perfect packing (from unit {} of {}, sizes ×{:.3f}; "
                      "{}){}",
                      format_bytes(t.projected_peak_bytes), t.reference_unit, t.earlier_units + 1, t.scale,
                      t.fit_error ? fmt::format("fit within {:.1f}% on {} earlier unit{}", 100 * *t.fit_error,
                                                t.checked_units, t.checked_units == 1 ? "" : "s")
                                  : std::string("its fit unchecked: no other earlier unit allocates like it"),
                      t.next_unit_extra_bytes == 0
                          ? ""
                          : fmt::format("; {} for a step like it a step later",
                                        format_bytes(t.projected_peak_bytes + t.next_unit_extra_bytes))));
  else if (d.projection.available)
    field(out, "projected",
          fmt::format("{} peak for the failing step (static {} + activations){}",
                      format_bytes(d.projection.projected_peak_bytes), format_bytes(d.projection.static_bytes),
                      d.projection.returning_bytes == 0
                          ? ""
                          : fmt::format("; {} for the steps after it, with {} of gradients back",
                                        format_bytes(d.projection.next_step_peak_bytes),
                                        format_bytes(d.projection.returning_bytes))));
  field(out, "ranks", d.rank_spread);

  out << "\nevidence\n";
  for (const auto& e : d.evidence) out << "  - " << e.text << '\n';
  lines(out, "what would decide it", d.decide_with);
  lines(out, "healthy", d.healthy);
  actions(out, "actions (try in this order)", d.actions, true);
  actions(out, "do not", d.do_not, false);

  if (!d.whatif.empty()) {
    const bool at_capacity = d.capacity_bytes.has_value();
    const bool projected = d.trace_projection.available;
    out << fmt::format("\nwhat if (trace replayed per PYTORCH_CUDA_ALLOC_CONF{})\n",
                       at_capacity ? " at " + format_bytes(*d.capacity_bytes) : std::string());
    out << fmt::format("  {:<52} {:>14}  {:<22}{}\n", "PYTORCH_CUDA_ALLOC_CONF",
                       at_capacity ? "reserved" : "peak reserved", at_capacity ? "at capacity" : "",
                       projected ? "  projected step" : "");
    for (const auto& w : d.whatif) {
      const std::string conf = (w.conf.empty() ? std::string("(defaults)") : w.conf) + (w.recorded ? " *" : "") +
                               (!d.recommended_conf.empty() && w.conf == d.recommended_conf ? " ←" : "");
      const std::uint64_t reserved =
          at_capacity ? w.peak_reserved_at_capacity_bytes.value_or(w.peak_reserved_bytes) : w.peak_reserved_bytes;
      out << fmt::format("  {:<52} {:>14}  {:<22}{}\n", conf, format_bytes(reserved), whatif_at_capacity(w),
                         projected ? "  " + projected_step(w) : std::string());
    }
    if (d.ideal_peak_bytes)
      out << fmt::format("  {:<52} {:>14}\n", "ideal packer (the floor)", format_bytes(*d.ideal_peak_bytes));
    out << fmt::format(
        "  * recorded config{}{}\n", d.recommended_conf.empty() ? "" : "   ← recommended",
        at_capacity ? "; reserved: the most each reserves under the capacity, up to the recorded OOM point" : "");
  }
  lines(out, "inputs used", d.inputs_used);
  lines(out, "skipped (damaged or special files)", skipped_lines(d));
  lines(out, "not given (what it would add)", d.inputs_missing);
}

}  // namespace fragscope::report
