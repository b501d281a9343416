#include "report/doctor_report.h"

#include <sstream>

#include <fmt/format.h>

#include "report/doctor_page_data.h"
#include "report/segment_lot.h"
#include "report/web_page.h"
#include "util/bytes.h"
#include "web/report_bundle.h"

namespace fragscope::report {
namespace {

using diagnose::Diagnosis;

/// One key figure: its value as data (for programs and tests) and in words.
void number(std::ostream& out, std::string_view id, std::string_view label, std::uint64_t bytes,
            std::string_view note = {}) {
  out << fmt::format(
      "<div class=\"number\" id=\"{}\" data-value=\"{}\"><span class=\"label\">{}</span>"
      "<span class=\"value\">{}</span>{}</div>",
      id, bytes, label, escape_html(format_bytes(bytes)),
      note.empty() ? std::string() : "<span class=\"note\">" + escape_html(note) + "</span>");
}

/// The figures a reader checks first: at the OOM when there was one.
void numbers(std::ostream& out, const Diagnosis& d) {
  out << "<div class=\"numbers\" id=\"numbers\">";
  if (d.oom_context) {
    const diagnose::OomContext& c = *d.oom_context;
    if (c.reserved_bytes) number(out, "n-reserved", "reserved at the OOM", *c.reserved_bytes);
    if (c.allocated_bytes) number(out, "n-allocated", "allocated at the OOM", *c.allocated_bytes);
    number(out, "n-request", "failed request", c.request_bytes);
    if (c.largest_free_block) number(out, "n-largest-hole", "largest free block", *c.largest_free_block);
  }
  if (!d.segment_map.empty()) {
    const SegmentTotals totals = segment_totals(d.segment_map);
    number(out, "n-free-in-segments", "free in the segments", totals.free_bytes,
           fmt::format("in {} segments {}", totals.segments, d.segment_map_at_oom ? "at the OOM" : "at the end"));
  }
  if (d.capacity_bytes) number(out, "n-capacity", "capacity", *d.capacity_bytes);
  if (d.data_wait_fraction)
    out << fmt::format(
        "<div class=\"number\" id=\"n-data-wait\" data-value=\"{:.4f}\"><span class=\"label\">data wait</span>"
        "<span class=\"value\">{:.1f}%</span><span class=\"note\">of step time</span></div>",
        *d.data_wait_fraction, 100 * *d.data_wait_fraction);
  out << "</div>\n";
}

void facts(std::ostream& out, const Diagnosis& d) {
  out << "<table class=\"facts\">";
  auto row = [&](std::string_view name, const std::string& value) {
    if (!value.empty()) out << "<tr><td>" << name << "</td><td>" << escape_html(value) << "</td></tr>";
  };
  row("phase", d.phase_source.empty() ? d.phase : d.phase + " — " + d.phase_source);
  row("trigger", d.trigger);
  if (d.data_wait_fraction)
    row("data wait", fmt::format("{:.1f}% of step time ({:.1f}% at steady state)", 100 * *d.data_wait_fraction,
                                 100 * d.steady_data_wait_fraction.value_or(*d.data_wait_fraction)));
  if (d.gpu_idle_fraction) row("GPU idle", fmt::format("{:.1f}% of nvidia-smi samples", 100 * *d.gpu_idle_fraction));
  if (d.capacity_bytes) row("capacity", format_bytes(*d.capacity_bytes) + " — " + d.capacity_source);
  if (d.trace_projection.available && d.trace_projection.from_training_call)
    row("projected eval peak", format_bytes(d.trace_projection.most_peak_bytes) + " at most, " +
                                   format_bytes(d.trace_projection.least_peak_bytes) +
                                   " at least — from the training's " + d.trace_projection.shared_function +
                                   " call, with perfect packing");
  else if (d.trace_projection.available)
    row("projected step peak", format_bytes(d.trace_projection.projected_peak_bytes) + " — from unit " +
                                   std::to_string(d.trace_projection.reference_unit) +
                                   " of the trace, with perfect packing");
  if (d.projection.available) row("projected step peak", format_bytes(d.projection.projected_peak_bytes));
  if (d.projection.available && d.projection.returning_bytes > 0)
    row("projected next steps", format_bytes(d.projection.next_step_peak_bytes) + " — with " +
                                    format_bytes(d.projection.returning_bytes) + " of gradients back");
  row("ranks", d.rank_spread);
  out << "</table>\n";
}

void list(std::ostream& out, std::string_view title, const std::vector<std::string>& items) {
  if (items.empty()) return;
  out << "<h2>" << title << "</h2><ul>";
  for (const auto& item : items) out << "<li>" << escape_html(item) << "</li>";
  out << "</ul>\n";
}

void action_list(std::ostream& out, std::string_view title, const std::vector<diagnose::Action>& items, bool ordered) {
  if (items.empty()) return;
  out << "<h2>" << title << "</h2>" << (ordered ? "<ol>" : "<ul>");
  for (const auto& a : items) {
    out << "<li><b>" << escape_html(a.title) << "</b>";
    if (ordered && !a.sufficient) out << " <span class=\"warn\">(not shown to be enough on its own)</span>";
    if (!a.setting.empty()) out << "<br><code>" << escape_html(a.setting) << "</code>";
    if (!a.evidence.empty()) out << "<br><span class=\"why\">" << escape_html(a.evidence) << "</span>";
    out << "</li>";
  }
  out << (ordered ? "</ol>" : "</ul>") << '\n';
}

/// A panel the script draws into: its title, one line on how to read it, the drawing's place.
void panel(std::ostream& out, std::string_view id, std::string_view title, std::string_view how_to_read) {
  out << "<section class=\"panel\" id=\"panel-" << id << "\"><h2>" << title << "</h2><p class=\"caption\">"
      << how_to_read << "</p><div class=\"chart\" id=\"" << id << "\"></div></section>\n";
}

void panels(std::ostream& out, const Diagnosis& d) {
  if (!d.segment_map.empty())
    panel(out, "segment-lot",
          d.segment_map_at_oom ? "Where the free bytes were at the OOM" : "Where the free bytes are at the end",
          "Every segment is a slot as long as its bytes, largest first, wrapped into lanes: blue allocated, "
          "green free, amber waiting on another stream. Segments too small to see are grouped. Below: the free "
          "bytes by the size of their hole, against the request that failed. Hover for details.");
  if (!d.timeline.empty())
    panel(out, "memory-curve", "Reserved and allocated over the trace",
          "Each point is the highest (line) and lowest (band) level over its stretch of the trace. Steps are "
          "marked on the top axis; the failing step is shaded. Drag to zoom, double-click to zoom out, hover "
          "for values.");
  if (!d.smi_trace.empty())
    panel(out, "smi-trace", "nvidia-smi: GPU utilisation and memory used",
          "What the driver saw, sample by sample (its own clock). Long stretches near 0% while the job runs "
          "are the GPU waiting. Drag to zoom.");
  if (!d.step_times.empty())
    panel(out, "step-times", "Step time: waiting for data vs computing",
          "One bar per step: amber is the wait for the next batch, blue the step's compute. Drag to zoom.");
  if (d.ranks.size() >= 2)
    panel(out, "ranks", "Per rank",
          "One small chart per rank on one scale: its recorded curve (or its steps' reserved bytes at each "
          "step's end), its peak and data-wait share in its title. The worst rank (the one that ran out of "
          "memory, else the one waiting for data, else the highest peak) is outlined; the pointer moves on all "
          "of them at once.");
}

void whatif_table(std::ostream& out, const Diagnosis& d) {
  if (d.whatif.empty()) return;
  const bool at_capacity = d.capacity_bytes.has_value();
  const bool projected = d.trace_projection.available;
  out << "<h2>What if: the trace replayed per allocator setting"
      << (at_capacity ? " at " + escape_html(format_bytes(*d.capacity_bytes)) : std::string()) << "</h2>\n";
  out << "<table id=\"whatif\"><tr><th>PYTORCH_CUDA_ALLOC_CONF</th><th>"
      << (at_capacity ? "reserved (to the OOM point)" : "peak reserved") << "</th><th>at capacity</th>"
      << (projected ? "<th>projected step</th>" : "") << "</tr>\n";
  for (const auto& w : d.whatif) {
    const bool recommended = !d.recommended_conf.empty() && w.conf == d.recommended_conf;
    const std::uint64_t reserved =
        at_capacity ? w.peak_reserved_at_capacity_bytes.value_or(w.peak_reserved_bytes) : w.peak_reserved_bytes;
    out << "<tr" << (recommended ? " class=\"rec\"" : "") << "><td><code>"
        << escape_html(w.conf.empty() ? "(defaults)" : w.conf) << "</code>" << (w.recorded ? " (recorded)" : "")
        << (recommended ? " ← recommended" : "") << "</td><td class=\"num\">" << escape_html(format_bytes(reserved))
        << "</td><td>" << escape_html(whatif_at_capacity(w)) << "</td>";
    if (projected)
      out << "<td>" << (!w.runs_projected_step ? "" : *w.runs_projected_step ? "runs it" : "OOM") << "</td>";
    out << "</tr>\n";
  }
  if (d.ideal_peak_bytes)
    out << "<tr><td>ideal packer (the floor)</td><td class=\"num\">" << escape_html(format_bytes(*d.ideal_peak_bytes))
        << "</td><td></td>" << (projected ? "<td></td>" : "") << "</tr>\n";
  out << "</table>\n";
}

}  // namespace

void write_doctor_html(std::ostream& page, const Diagnosis& d) {
  const std::string verdict(diagnose::to_string(d.verdict));
  std::ostringstream out;
  out << "<h1><span class=\"verdict v-" << verdict << "\" id=\"verdict\">" << verdict << "</span>"
      << escape_html(d.headline) << "</h1>\n";
  numbers(out, d);
  list(out, "Warnings", d.warnings);
  facts(out, d);
  action_list(out, "Actions, in the order to try them", d.actions, true);
  panels(out, d);
  list(out, "Evidence", [&] {
    std::vector<std::string> lines;
    for (const auto& e : d.evidence) lines.push_back(e.text);
    return lines;
  }());
  list(out, "What would decide it", d.decide_with);
  list(out, "Healthy", d.healthy);
  action_list(out, "Do not", d.do_not, false);
  whatif_table(out, d);
  list(out, "Inputs used", d.inputs_used);
  list(out, "Skipped (damaged or special files)", [&] {
    std::vector<std::string> lines;
    for (const auto& [path, reason] : d.skipped_inputs) lines.push_back(path + ": " + reason);
    return lines;
  }());
  list(out, "Not given (and what it would add)", d.inputs_missing);
  out << "<p class=\"note\">fragscope doctor · one self-contained page: it loads nothing from the network.</p>";
  const nlohmann::json data = doctor_page_data(d);
  const std::string title = "fragscope doctor: " + verdict;
  const std::string body = out.str();
  write_web_page(page, {title, "", body, &data, web::report_bundle()});
}

}  // namespace fragscope::report
