#include "report/replay_report.h"

#include <string>

#include <fmt/format.h>

#include "report/json_header.h"
#include "report/timeline_chart.h"
#include "util/bytes.h"
#include "util/shown_text.h"

namespace fragscope::report {

using replay::Capacity;
using replay::CapacityChange;
using replay::CapacityStep;
using replay::PreparedTrace;
using replay::ReplayResult;
using replay::ReplaySummary;
using replay::TimelinePoint;
using replay::WhatIfReport;
using replay::WhatIfRow;

namespace {

std::string quoted_conf(const std::string& conf) { return fmt::format("\"{}\"", conf); }

/// How far `value` lies above `base`, in percent (negative below). REQUIRES: base > 0.
double percent_change(std::uint64_t value, std::uint64_t base) {
  return (static_cast<double>(value) - static_cast<double>(base)) / static_cast<double>(base) * 100.0;
}

std::string percent_over(std::uint64_t value, std::uint64_t base) {
  if (base == 0) return "n/a";
  return fmt::format("{:+.1f}%", percent_change(value, base));
}

/// The replay's reserved peak against the ideal packer's. Below it only when the replay failed where the run did:
/// the ideal packer, without a capacity, served the request the run died on.
std::string against_the_floor(std::uint64_t reserved, std::uint64_t floor) {
  if (floor == 0) return "reserved n/a";
  const double pct = percent_change(reserved, floor);
  if (pct >= 0) return fmt::format("reserved is {:.1f}% above it", pct);
  return fmt::format("reserved is {:.1f}% below it: the replay never held the request it failed on", -pct);
}

std::string trace_line(const PreparedTrace& trace) {
  return fmt::format("{} · device {} · {} events ({})", shown_name(trace.source, kShownPathBytes), trace.device,
                     trace.trace_events,
                     trace.starts_mid_run ? "starts mid-run: state rebuilt from the end"
                                          : "complete from an empty allocator");
}

/// One line on where and how the replay ran out of memory, or why it did not.
std::string oom_line(const ReplayResult& r) {
  if (r.oom) {
    const std::string where = fmt::format("at event {}, asking for {}", *r.oom_trace_index,
                                          format_bytes(r.oom_request_bytes));
    if (r.oom_matches_recorded) return where + ": where the recorded run failed too";
    return where + ": the recorded run did not fail here; the replay stops (the rest of the "
                   "trace assumes this malloc succeeded)";
  }
  if (r.passed_recorded_oom) {
    return fmt::format("none: it serves the request the recorded run died on (event {}); the "
                       "trace ends there, so peaks cover the run up to that point",
                       r.last_trace_index);
  }
  return "none";
}

/// One movement of the memory outside the caching allocator.
std::string change_line(const CapacityChange& c) {
  return fmt::format("non-PyTorch memory {} by {} (at least {}) between events {} and {}: capacity {} → {}",
                     c.non_pytorch_grew() ? "grew" : "shrank",
                     format_bytes(c.non_pytorch_grew() ? c.from_bytes - c.to_bytes : c.to_bytes - c.from_bytes),
                     format_bytes(c.at_least_bytes), c.after_trace_index, c.by_trace_index,
                     format_bytes(c.from_bytes), format_bytes(c.to_bytes));
}

nlohmann::json timeline_json(const std::vector<TimelinePoint>& points) {
  nlohmann::json out = nlohmann::json::array();
  for (const TimelinePoint& p : points) {
    out.push_back({{"first_event", p.first_trace_index},
                   {"last_event", p.last_trace_index},
                   {"reserved_bytes", p.reserved},
                   {"allocated_bytes", p.allocated}});
  }
  return out;
}

nlohmann::json optional_index(const std::optional<std::uint32_t>& index) {
  return index ? nlohmann::json(*index) : nlohmann::json(nullptr);
}

nlohmann::json capacity_json(const Capacity& c) {
  nlohmann::json steps = nlohmann::json::array();
  for (const CapacityStep& step : c.steps) {
    steps.push_back({{"from_event", step.from_trace_index}, {"bytes", step.bytes}});
  }
  nlohmann::json changes = nlohmann::json::array();
  for (const CapacityChange& change : c.changes) {
    changes.push_back({{"after_event", change.after_trace_index},
                       {"by_event", change.by_trace_index},
                       {"from_bytes", change.from_bytes},
                       {"to_bytes", change.to_bytes},
                       {"at_least_bytes", change.at_least_bytes}});
  }
  return {{"bytes", c.bytes ? nlohmann::json(*c.bytes) : nlohmann::json(nullptr)},
          {"allowed_maximum_bytes",
           c.allowed_maximum ? nlohmann::json(*c.allowed_maximum) : nlohmann::json(nullptr)},
          {"source", c.source},
          {"steps", steps},
          {"changes", changes}};
}

}  // namespace

void write_replay_text(std::ostream& out, const ReplaySummary& s) {
  const PreparedTrace& trace = *s.trace;
  const ReplayResult& r = s.result;
  const alloc::AllocatorStats& st = r.stats;
  out << "replay    " << trace_line(trace) << "\n";
  out << fmt::format("config    {}  ({})\n", quoted_conf(s.conf),
                     s.conf_is_recorded
                         ? "as recorded"
                         : "what-if; recorded " +
                               quoted_conf(alloc::to_alloc_conf(trace.recorded_config)));
  out << fmt::format("capacity  {}{}\n",
                     s.capacity.bytes ? format_bytes(*s.capacity.bytes) + ": " : "",
                     s.capacity.source);
  if (s.capacity.allowed_maximum) {
    out << fmt::format("fraction  {} allowed (set_per_process_memory_fraction)\n",
                       format_bytes(*s.capacity.allowed_maximum));
  }
  for (const CapacityChange& c : s.capacity.changes) out << "          " << change_line(c) << "\n";
  out << "\n";
  std::string vs_recorded;
  if (s.conf_is_recorded) {
    const std::uint64_t rec = trace.recorded_peak_reserved;
    vs_recorded = st.peak_reserved_bytes == rec
                      ? "recorded " + format_bytes(rec) + ": exact"
                      : fmt::format("recorded {} ({})", format_bytes(rec),
                                    percent_over(st.peak_reserved_bytes, rec));
  } else {
    vs_recorded = fmt::format("recorded config: {}", format_bytes(trace.recorded_peak_reserved));
  }
  out << fmt::format("peak reserved    {:>12}   {}\n", format_bytes(st.peak_reserved_bytes),
                     vs_recorded);
  out << fmt::format("peak allocated   {:>12}\n", format_bytes(st.peak_allocated_bytes));
  out << fmt::format("ideal packer     {:>12}   the floor; {}\n", format_bytes(s.ideal.stats.peak_reserved_bytes),
                     against_the_floor(st.peak_reserved_bytes, s.ideal.stats.peak_reserved_bytes));
  out << fmt::format("retries          {:>12}   mallocs that freed the whole cache and retried\n",
                     st.num_alloc_retries);
  out << fmt::format("segments         {:>12}   cudaMalloc segments live at the end\n",
                     st.segments);
  out << fmt::format("OOM              {}\n", oom_line(r));
  if (s.at_start_capacity) {
    const ReplayResult& a = *s.at_start_capacity;
    out << fmt::format("OOM cause        {}\n",
                       a.oom && a.oom_matches_recorded
                           ? fmt::format("not the growth of non-PyTorch memory: at the starting capacity ({}) the run "
                                         "fails there too", format_bytes(s.capacity.steps.front().bytes))
                           : fmt::format("non-PyTorch memory's growth: at the starting capacity ({}) the run {}",
                                         format_bytes(s.capacity.steps.front().bytes),
                                         a.oom ? fmt::format("fails elsewhere (event {})", *a.oom_trace_index)
                                               : "passes its OOM"));
  }
  if (trace.flushes) {
    out << fmt::format("flushes          {:>12}   emptyCache() calls (user, framework, cuDNN), replayed as flushes\n",
                       trace.flushes);
  }
  if (r.caught_ooms || r.served_caught_ooms) {
    out << fmt::format("caught OOMs      {:>12}   OOMs the run's caller caught: {} failed here too, {} served\n",
                       r.caught_ooms + r.served_caught_ooms, r.caught_ooms, r.served_caught_ooms);
  }
  if (s.conf_is_recorded) {
    if (r.segment_mismatches == 0) {
      out << "self-check       every malloc's segment events match the recording\n";
    } else {
      out << fmt::format(
          "self-check       {} mallocs' segment events differ from the recording (first at "
          "event {}): treat these results with care\n",
          r.segment_mismatches, *r.first_mismatch_trace_index);
    }
  }
  if (trace.anomalies) {
    out << fmt::format("anomalies        {} trace events matched no live block (ring-buffer "
                       "edge or lock race); skipped\n",
                       trace.anomalies);
  }
  if (!r.timeline.empty()) {
    out << "\n";
    write_timeline_chart(out, r.timeline);
  }
}

nlohmann::json replay_json(const ReplaySummary& s) {
  const PreparedTrace& trace = *s.trace;
  const ReplayResult& r = s.result;
  nlohmann::json j = {
      {"snapshot", trace.source},
      {"device", trace.device},
      {"trace_events", trace.trace_events},
      {"starts_mid_run", trace.starts_mid_run},
      {"alloc_conf", s.conf},
      {"alloc_conf_is_recorded", s.conf_is_recorded},
      {"capacity", capacity_json(s.capacity)},
      {"peak_reserved_bytes", r.stats.peak_reserved_bytes},
      {"peak_allocated_bytes", r.stats.peak_allocated_bytes},
      {"ideal_peak_bytes", s.ideal.stats.peak_reserved_bytes},
      {"num_alloc_retries", r.stats.num_alloc_retries},
      {"num_ooms", r.stats.num_ooms},
      {"segments_at_end", r.stats.segments},
      {"reserved_bytes_at_end", r.stats.reserved_bytes},
      {"allocated_bytes_at_end", r.stats.allocated_bytes},
      {"oom", r.oom},
      {"oom_event_index", optional_index(r.oom_trace_index)},
      {"oom_request_bytes", r.oom ? nlohmann::json(r.oom_request_bytes) : nlohmann::json(nullptr)},
      {"oom_matches_recorded", r.oom_matches_recorded},
      {"passed_recorded_oom", r.passed_recorded_oom},
      {"completed", r.completed},
      {"last_event_index", r.last_trace_index},
      {"recorded",
       {{"peak_reserved_bytes", trace.recorded_peak_reserved},
        {"initial_reserved_bytes", trace.recorded_initial_reserved},
        {"oom_event_index", replay::fatal_oom(trace) ? nlohmann::json(replay::fatal_oom(trace)->trace_index)
                                                    : nlohmann::json(nullptr)},
        {"failed_cuda_mallocs", trace.capacity.release_bursts},
        {"flushes", trace.flushes}}},
      {"caught_ooms", {{"failed", r.caught_ooms}, {"served", r.served_caught_ooms}}},
      {"oom_at_start_capacity",
       s.at_start_capacity ? nlohmann::json{{"oom", s.at_start_capacity->oom},
                                            {"oom_event_index", optional_index(s.at_start_capacity->oom_trace_index)},
                                            {"passed_recorded_oom", s.at_start_capacity->passed_recorded_oom}}
                           : nlohmann::json(nullptr)},
      {"self_check",
       s.conf_is_recorded
           ? nlohmann::json{{"segment_mismatches", r.segment_mismatches},
                            {"first_mismatch_event_index",
                             optional_index(r.first_mismatch_trace_index)}}
           : nlohmann::json(nullptr)},
      {"anomalies", trace.anomalies},
      {"timeline", timeline_json(r.timeline)},
  };
  add_json_header(j, kReplayJsonSchema);
  return j;
}

void write_whatif_text(std::ostream& out, const PreparedTrace& trace, const WhatIfReport& report) {
  const std::uint64_t floor = report.ideal.stats.peak_reserved_bytes;
  out << "whatif    " << trace_line(trace) << "\n";
  out << fmt::format("capacity  {}{}\n",
                     report.capacity.bytes ? format_bytes(*report.capacity.bytes) + ": " : "",
                     report.capacity.source);
  const replay::ReplayConcurrency& c = report.concurrency;
  out << fmt::format("{} configs on {} thread{}{}; peak reserved without a memory limit\n\n", report.rows.size(),
                     c.threads, c.threads == 1 ? "" : "s",
                     c.memory_limited ? fmt::format(" ({} asked: each replay holds up to {}, and together they stay "
                                                    "within {})",
                                                    c.asked, format_bytes(c.replay_bytes), format_bytes(c.budget_bytes))
                                      : std::string());
  const bool min_cap = !report.rows.empty() && report.rows.front().min_capacity.has_value();
  std::string header = fmt::format("  {:<56} {:>12} {:>8} {:>7}", "PYTORCH_CUDA_ALLOC_CONF",
                                   "peak", "vs floor", "retries");
  if (report.capacity.bytes) header += fmt::format("  {:<22}", "at capacity");
  if (min_cap) header += fmt::format(" {:>12}", "needs");
  out << header << "\n";
  for (std::size_t i = 0; i < report.rows.size(); ++i) {
    const WhatIfRow& row = report.rows[i];
    const std::string name = (row.config.conf.empty() ? "(defaults)" : row.config.conf) +
                             (row.config.recorded ? " *" : "");
    std::string line = fmt::format(
        "{} {:<56} {:>12} {:>8} {:>7}", report.recommended == i ? "→" : " ", name,
        format_bytes(row.unlimited.stats.peak_reserved_bytes),
        percent_over(row.unlimited.stats.peak_reserved_bytes, floor),
        row.unlimited.stats.num_alloc_retries);
    if (row.at_capacity) {
      const ReplayResult& c = *row.at_capacity;
      line += fmt::format("  {:<22}", c.oom ? fmt::format("OOM at event {}", *c.oom_trace_index)
                                             : (c.passed_recorded_oom ? "fits (passes the OOM)"
                                                                      : "fits"));
    }
    if (row.min_capacity) line += fmt::format(" {:>12}", format_bytes(*row.min_capacity));
    out << line << "\n";
  }
  out << fmt::format("  {:<56} {:>12} {:>8}\n", "ideal packer (the floor)", format_bytes(floor),
                     "");
  out << "  * the recorded config";
  if (report.rows.size() && report.rows.front().unlimited.passed_recorded_oom) {
    out << "; peaks cover the run up to the recorded OOM, where the trace ends";
  }
  out << "\n\n";
  if (min_cap) {
    for (const WhatIfRow& row : report.rows) {
      if (row.config.recorded) {
        out << fmt::format("this run needs {} as recorded", format_bytes(*row.min_capacity));
      }
    }
    if (report.recommended) {
      const WhatIfRow& best = report.rows[*report.recommended];
      out << fmt::format(", {} with {}", format_bytes(*best.min_capacity),
                         best.config.conf.empty() ? "the defaults" : best.config.conf);
    }
    out << fmt::format("; nothing can do with less than {}\n", format_bytes(floor));
  }
  if (report.recommended) {
    const WhatIfRow& best = report.rows[*report.recommended];
    out << fmt::format("recommended: PYTORCH_CUDA_ALLOC_CONF={}\n",
                       best.config.conf.empty() ? "\"\"  (PyTorch's defaults)"
                                                : best.config.conf);
  } else {
    out << "recommended: none of these configs fits the capacity; the run needs more memory "
           "(see the floor) or a smaller workload\n";
  }
}

nlohmann::json whatif_json(const PreparedTrace& trace, const WhatIfReport& report) {
  nlohmann::json rows = nlohmann::json::array();
  for (const WhatIfRow& row : report.rows) {
    nlohmann::json j = {
        {"alloc_conf", row.config.conf},
        {"recorded", row.config.recorded},
        {"peak_reserved_bytes", row.unlimited.stats.peak_reserved_bytes},
        {"peak_allocated_bytes", row.unlimited.stats.peak_allocated_bytes},
        {"num_alloc_retries", row.unlimited.stats.num_alloc_retries},
        {"passed_recorded_oom", row.unlimited.passed_recorded_oom},
        {"fits_capacity", row.fits()},
    };
    if (row.at_capacity) {
      j["at_capacity"] = {{"oom", row.at_capacity->oom},
                          {"oom_event_index", optional_index(row.at_capacity->oom_trace_index)},
                          {"peak_reserved_bytes", row.at_capacity->stats.peak_reserved_bytes},
                          {"num_alloc_retries", row.at_capacity->stats.num_alloc_retries}};
    }
    j["min_capacity_bytes"] =
        row.min_capacity ? nlohmann::json(*row.min_capacity) : nlohmann::json(nullptr);
    rows.push_back(std::move(j));
  }
  nlohmann::json j = {{"snapshot", trace.source},
                      {"device", trace.device},
                      {"trace_events", trace.trace_events},
                      {"capacity", capacity_json(report.capacity)},
                      {"ideal_peak_bytes", report.ideal.stats.peak_reserved_bytes},
                      {"threads", report.concurrency.threads},
                      {"threads_asked", report.concurrency.asked},
                      {"replay_memory_bytes", report.concurrency.replay_bytes},
                      {"replay_memory_budget_bytes", report.concurrency.budget_bytes},
                      {"configs", rows},
                      {"recommended_alloc_conf",
                       report.recommended ? nlohmann::json(report.rows[*report.recommended].config.conf)
                                          : nlohmann::json(nullptr)}};
  add_json_header(j, kWhatIfJsonSchema);
  return j;
}

}  // namespace fragscope::report
