#include "report/doctor_report.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include <fmt/format.h>

#include "report/web_page.h"
#include "util/bytes.h"
#include "web/report_bundle.h"

namespace fragscope::report {
namespace {

using diagnose::Diagnosis;
using metrics::RunKind;
using metrics::SegmentRow;

constexpr const char* kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1280px;color:#1d2330;padding:0 16px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde2ea;padding-bottom:4px}
.verdict{display:inline-block;padding:3px 12px;border-radius:12px;color:#fff;font-weight:600;margin-right:8px}
.v-ok{background:#2e8540}.v-capacity{background:#b3261e}.v-fragmentation{background:#c66a00}.v-input_bound{background:#5b3fb3}.v-undetermined{background:#5f6b7a}
table{border-collapse:collapse} td,th{padding:3px 10px;text-align:left;border-bottom:1px solid #eef1f5;vertical-align:top}
th{color:#5f6b7a;font-weight:600} td.num{text-align:right;font-variant-numeric:tabular-nums}
code{background:#f3f5f8;padding:1px 4px;border-radius:3px;font-size:13px}
.facts td:first-child{color:#5f6b7a;white-space:nowrap} li{margin:3px 0}
.why{color:#4a5465} .warn{color:#b3261e} .rec{background:#fff6e0} .note{color:#5f6b7a;font-size:13px}
svg text{font:11px system-ui,sans-serif;fill:#1d2330}
)";

const char* run_colour(RunKind kind) {
  switch (kind) {
    case RunKind::kAllocated: return "#3d6fb6";
    case RunKind::kPendingFree: return "#e0a030";
    case RunKind::kFree: return "#d9efe0";
  }
  return "#ccc";
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
  if (d.trace_projection.available)
    row("projected step peak", format_bytes(d.trace_projection.projected_peak_bytes) + " — from unit " +
                                   std::to_string(d.trace_projection.reference_unit) + " of the trace, with perfect packing");
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

/// The segments as horizontal bars (largest first, one scale), blocks coloured by state; the
/// failed request drawn under the segment with the largest hole, at the hole's offset.
void segment_map_svg(std::ostream& out, const Diagnosis& d) {
  if (d.segment_map.empty()) return;
  out << "<h2>Segment map " << (d.segment_map_at_oom ? "at the OOM" : "at the end of the trace") << "</h2>\n";
  constexpr std::size_t kMaxRows = 40;
  std::vector<const SegmentRow*> rows;
  for (const auto& row : d.segment_map) rows.push_back(&row);
  std::sort(rows.begin(), rows.end(), [](const SegmentRow* a, const SegmentRow* b) {
    return a->total_size != b->total_size ? a->total_size > b->total_size : a->address < b->address;
  });
  const SegmentRow* hole_row = *std::max_element(rows.begin(), rows.end(), [](const SegmentRow* a, const SegmentRow* b) {
    return a->largest_free < b->largest_free;
  });
  std::vector<const SegmentRow*> drawn(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(std::min(kMaxRows, rows.size())));
  if (std::find(drawn.begin(), drawn.end(), hole_row) == drawn.end()) drawn.push_back(hole_row);
  const std::uint64_t request = d.oom_context ? d.oom_context->request_bytes : 0;
  const std::uint64_t scale = std::max(drawn.front()->total_size, request);
  constexpr double kLeft = 90, kWidth = 1060, kRow = 16, kGap = 4;
  const bool show_request = request > 0 && hole_row->largest_free > 0;
  const double height = static_cast<double>(drawn.size() + (show_request ? 1 : 0)) * (kRow + kGap) + 40;
  out << fmt::format("<svg id=\"segment-map\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{:.0f}\" role=\"img\" "
                     "aria-label=\"segment map\">\n", kLeft + kWidth + 20, height);
  auto x_of = [&](std::uint64_t bytes) { return kWidth * static_cast<double>(bytes) / static_cast<double>(scale); };
  double y = 10;
  for (const SegmentRow* row : drawn) {
    out << fmt::format("<text x=\"0\" y=\"{:.0f}\">{}<title>segment at 0x{:x}</title></text>", y + 12,
                       escape_html(format_bytes(row->total_size)), row->address);
    for (const auto& run : row->runs)
      out << fmt::format("<rect x=\"{:.2f}\" y=\"{:.0f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\"><title>{} {}</title></rect>",
                         kLeft + x_of(run.offset), y, std::max(0.5, x_of(run.size)), kRow, run_colour(run.kind),
                         run.kind == RunKind::kAllocated ? "allocated" : run.kind == RunKind::kFree ? "free" : "pending free",
                         escape_html(format_bytes(run.size)));
    out << fmt::format("<rect x=\"{}\" y=\"{:.0f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"none\" stroke=\"#1d2330\" stroke-width=\"0.6\"/>\n",
                       kLeft, y, x_of(row->total_size), kRow);
    if (row == hole_row && show_request) {
      std::uint64_t hole_offset = 0;
      for (const auto& run : row->runs)
        if (run.kind == RunKind::kFree && run.size == row->largest_free) hole_offset = run.offset;
      out << fmt::format("<rect x=\"{:.2f}\" y=\"{:.0f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"none\" stroke=\"#2e8540\" stroke-width=\"2\"/>",
                         kLeft + x_of(hole_offset), y - 1, x_of(row->largest_free), kRow + 2);
      y += kRow + kGap;
      out << fmt::format("<rect id=\"failed-request\" x=\"{:.2f}\" y=\"{:.0f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"#b3261e\"/>",
                         kLeft + x_of(hole_offset), y, x_of(request), kRow);
      out << fmt::format("<text x=\"0\" y=\"{:.0f}\" style=\"fill:#b3261e;font-weight:600\">failed request</text>", y + 12);
      out << fmt::format("<text x=\"{:.2f}\" y=\"{:.0f}\">request {} vs largest hole {}</text>\n", kLeft + x_of(hole_offset) + x_of(request) + 6,
                         y + 12, escape_html(format_bytes(request)), escape_html(format_bytes(row->largest_free)));
    }
    y += kRow + kGap;
  }
  const double legend_y = y + 12;
  double lx = kLeft;
  for (const auto& [name, colour] : {std::pair{"allocated", run_colour(RunKind::kAllocated)}, std::pair{"free (cached)", run_colour(RunKind::kFree)},
                                     std::pair{"pending free", run_colour(RunKind::kPendingFree)}}) {
    out << fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"12\" height=\"12\" fill=\"{}\" stroke=\"#999\"/><text x=\"{:.0f}\" y=\"{:.0f}\">{}</text>",
                       lx, legend_y - 10, colour, lx + 16, legend_y, name);
    lx += 130;
  }
  out << "</svg>\n";
  if (rows.size() > drawn.size()) {
    std::uint64_t rest = 0, rest_free = 0;
    for (std::size_t i = drawn.size(); i < rows.size(); ++i)
      if (std::find(drawn.begin(), drawn.end(), rows[i]) == drawn.end()) {
        rest += rows[i]->total_size;
        rest_free += rows[i]->free_bytes;
      }
    out << fmt::format("<p class=\"note\">{} smaller segments not drawn: {} reserved, {} of it free.</p>\n",
                       rows.size() - drawn.size(), escape_html(format_bytes(rest)), escape_html(format_bytes(rest_free)));
  }
}

/// Reserved (filled) and allocated (line) over the trace, the capacity dashed, the OOM marked.
void timeline_svg(std::ostream& out, const Diagnosis& d) {
  if (d.timeline.empty()) return;
  out << "<h2>Reserved and allocated over the trace</h2>\n";
  constexpr double kLeft = 80, kWidth = 1100, kHeight = 260, kTop = 10;
  std::uint64_t top = 1;
  for (const auto& p : d.timeline) top = std::max({top, p.reserved_bytes, p.allocated_bytes});
  if (d.capacity_bytes) top = std::max(top, *d.capacity_bytes);
  const std::size_t last = std::max<std::size_t>(1, d.timeline.back().trace_index);
  auto x = [&](std::size_t index) { return kLeft + kWidth * static_cast<double>(index) / static_cast<double>(last); };
  auto y = [&](std::uint64_t bytes) { return kTop + kHeight * (1.0 - static_cast<double>(bytes) / static_cast<double>(top)); };
  out << fmt::format("<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"timeline\">\n",
                     kLeft + kWidth + 20, kTop + kHeight + 40);
  std::string reserved = fmt::format("M{:.1f},{:.1f}", x(0), y(0));
  std::string allocated;
  for (const auto& p : d.timeline) {
    reserved += fmt::format(" L{:.1f},{:.1f}", x(p.trace_index), y(p.reserved_bytes));
    allocated += fmt::format("{}{:.1f},{:.1f}", allocated.empty() ? "M" : " L", x(p.trace_index), y(p.allocated_bytes));
  }
  reserved += fmt::format(" L{:.1f},{:.1f} Z", x(last), y(0));
  out << fmt::format("<path d=\"{}\" fill=\"#c9d8ef\" stroke=\"#7d9bd0\"/>\n<path d=\"{}\" fill=\"none\" stroke=\"#1d3f7a\" stroke-width=\"1.5\"/>\n",
                     reserved, allocated);
  for (int i = 0; i <= 4; ++i) {
    const std::uint64_t bytes = top / 4 * static_cast<std::uint64_t>(i);
    out << fmt::format("<text x=\"0\" y=\"{:.1f}\">{}</text><line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#eef1f5\"/>",
                       y(bytes) + 4, escape_html(format_bytes(bytes)), kLeft, kLeft + kWidth, y(bytes), y(bytes));
  }
  if (d.capacity_bytes)
    out << fmt::format("<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#b3261e\" stroke-dasharray=\"6,4\"/>"
                       "<text x=\"{}\" y=\"{:.1f}\" style=\"fill:#b3261e\">capacity {}</text>\n",
                       kLeft, kLeft + kWidth, y(*d.capacity_bytes), y(*d.capacity_bytes), kLeft + 4, y(*d.capacity_bytes) - 4,
                       escape_html(format_bytes(*d.capacity_bytes)));
  if (d.timeline_oom_index)
    out << fmt::format("<line id=\"oom-marker\" x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#b3261e\" stroke-width=\"2\"/>"
                       "<text x=\"{3:.1f}\" y=\"{4}\" style=\"fill:#b3261e;font-weight:600\">OOM (event {5})</text>\n",
                       x(*d.timeline_oom_index), kTop, kTop + kHeight, x(*d.timeline_oom_index) - 110, kTop + 14, *d.timeline_oom_index);
  out << fmt::format("<text x=\"{}\" y=\"{}\">trace event 0</text><text x=\"{}\" y=\"{}\">{}</text>", kLeft, kTop + kHeight + 16,
                     kLeft + kWidth - 60, kTop + kHeight + 16, last);
  out << fmt::format("<rect x=\"{0}\" y=\"{1}\" width=\"12\" height=\"12\" fill=\"#c9d8ef\" stroke=\"#7d9bd0\"/><text x=\"{2}\" y=\"{3}\">reserved</text>"
                     "<line x1=\"{4}\" x2=\"{5}\" y1=\"{6}\" y2=\"{6}\" stroke=\"#1d3f7a\" stroke-width=\"2\"/><text x=\"{7}\" y=\"{3}\">allocated</text>\n",
                     kLeft + 200, kTop + kHeight + 24, kLeft + 216, kTop + kHeight + 34, kLeft + 300, kLeft + 318, kTop + kHeight + 30, kLeft + 324);
  out << "</svg>\n";
}

/// Each step's time as a bar: waiting for data on top of computing.
void step_time_svg(std::ostream& out, const Diagnosis& d) {
  if (d.step_times.empty()) return;
  out << "<h2>Step time: waiting for data vs computing</h2>\n";
  constexpr double kLeft = 80, kWidth = 1100, kHeight = 200, kTop = 10;
  double top = 1;
  for (const auto& s : d.step_times) top = std::max(top, s.data_wait_ms + s.compute_ms);
  const double bar = kWidth / static_cast<double>(d.step_times.size());
  auto y = [&](double ms) { return kTop + kHeight * (1.0 - ms / top); };
  out << fmt::format("<svg id=\"step-times\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"step times\">\n",
                     kLeft + kWidth + 20, kTop + kHeight + 40);
  for (std::size_t i = 0; i < d.step_times.size(); ++i) {
    const auto& s = d.step_times[i];
    const double x = kLeft + bar * static_cast<double>(i);
    out << fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"#3d6fb6\"/>", x, y(s.compute_ms),
                       std::max(0.5, bar * 0.85), kTop + kHeight - y(s.compute_ms));
    out << fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"#e0a030\"><title>step {}: wait {:.1f} ms, compute {:.1f} ms</title></rect>\n",
                       x, y(s.compute_ms + s.data_wait_ms), std::max(0.5, bar * 0.85), y(s.compute_ms) - y(s.compute_ms + s.data_wait_ms),
                       s.step, s.data_wait_ms, s.compute_ms);
  }
  out << fmt::format("<text x=\"0\" y=\"{:.1f}\">{:.0f} ms</text><text x=\"0\" y=\"{:.1f}\">0</text>", kTop + 10, top, kTop + kHeight);
  out << fmt::format("<rect x=\"{0}\" y=\"{1}\" width=\"12\" height=\"12\" fill=\"#e0a030\"/><text x=\"{2}\" y=\"{3}\">waiting for data</text>"
                     "<rect x=\"{4}\" y=\"{1}\" width=\"12\" height=\"12\" fill=\"#3d6fb6\"/><text x=\"{5}\" y=\"{3}\">computing</text>"
                     "<text x=\"{6}\" y=\"{3}\">steps {7} – {8}</text>\n",
                     kLeft, kTop + kHeight + 20, kLeft + 16, kTop + kHeight + 30, kLeft + 150, kLeft + 166, kLeft + 300,
                     d.step_times.front().step, d.step_times.back().step);
  out << "</svg>\n";
}

void whatif_table(std::ostream& out, const Diagnosis& d) {
  if (d.whatif.empty()) return;
  const bool at_capacity = d.capacity_bytes.has_value();
  const bool projected = d.trace_projection.available;
  out << "<h2>What if: the trace replayed per allocator setting"
      << (at_capacity ? " at " + escape_html(format_bytes(*d.capacity_bytes)) : std::string()) << "</h2>\n";
  out << "<table id=\"whatif\"><tr><th>PYTORCH_CUDA_ALLOC_CONF</th><th>" << (at_capacity ? "reserved (to the OOM point)" : "peak reserved")
      << "</th><th>at capacity</th>" << (projected ? "<th>projected step</th>" : "") << "</tr>\n";
  for (const auto& w : d.whatif) {
    const bool recommended = !d.recommended_conf.empty() && w.conf == d.recommended_conf;
    const std::uint64_t reserved =
        at_capacity ? w.peak_reserved_at_capacity_bytes.value_or(w.peak_reserved_bytes) : w.peak_reserved_bytes;
    out << "<tr" << (recommended ? " class=\"rec\"" : "") << "><td><code>" << escape_html(w.conf.empty() ? "(defaults)" : w.conf) << "</code>"
        << (w.recorded ? " (recorded)" : "") << (recommended ? " ← recommended" : "") << "</td><td class=\"num\">"
        << escape_html(format_bytes(reserved)) << "</td><td>" << escape_html(whatif_at_capacity(w)) << "</td>";
    if (projected) out << "<td>" << (!w.runs_projected_step ? "" : *w.runs_projected_step ? "runs it" : "OOM") << "</td>";
    out << "</tr>\n";
  }
  if (d.ideal_peak_bytes)
    out << "<tr><td>ideal packer (the floor)</td><td class=\"num\">" << escape_html(format_bytes(*d.ideal_peak_bytes)) << "</td><td></td>"
        << (projected ? "<td></td>" : "") << "</tr>\n";
  out << "</table>\n";
}

}  // namespace

void write_doctor_html(std::ostream& page, const Diagnosis& d) {
  const std::string verdict(diagnose::to_string(d.verdict));
  std::ostringstream out;
  out << "<h1><span class=\"verdict v-" << verdict << "\" id=\"verdict\">" << verdict << "</span>" << escape_html(d.headline) << "</h1>\n";
  list(out, "Warnings", d.warnings);
  facts(out, d);
  list(out, "Evidence", [&] {
    std::vector<std::string> lines;
    for (const auto& e : d.evidence) lines.push_back(e.text);
    return lines;
  }());
  list(out, "What would decide it", d.decide_with);
  list(out, "Healthy", d.healthy);
  action_list(out, "Actions, in the order to try them", d.actions, true);
  action_list(out, "Do not", d.do_not, false);
  segment_map_svg(out, d);
  timeline_svg(out, d);
  whatif_table(out, d);
  step_time_svg(out, d);
  list(out, "Inputs used", d.inputs_used);
  list(out, "Skipped (damaged or special files)", [&] {
    std::vector<std::string> lines;
    for (const auto& [path, reason] : d.skipped_inputs) lines.push_back(path + ": " + reason);
    return lines;
  }());
  list(out, "Not given (and what it would add)", d.inputs_missing);
  out << "<p class=\"note\">fragscope doctor · self-contained page, no network access.</p>";
  const std::string title = "fragscope doctor: " + verdict;
  const std::string body = out.str();
  write_web_page(page, {title, kStyle, body, nullptr, web::report_bundle()});
}

}  // namespace fragscope::report
