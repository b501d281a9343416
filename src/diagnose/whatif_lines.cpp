#include "diagnose/whatif_lines.h"

namespace fragscope::diagnose {

void fill_whatif(const replay::WhatIfReport& report, Diagnosis& d) {
  for (const replay::WhatIfRow& row : report.rows) {
    WhatIfLine line;
    line.conf = row.config.conf;
    line.recorded = row.config.recorded;
    line.peak_reserved_bytes = row.unlimited.stats.peak_reserved_bytes;
    if (row.at_capacity) {
      line.peak_reserved_at_capacity_bytes = row.at_capacity->stats.peak_reserved_bytes;
      if (row.at_capacity->oom) line.oom_event = row.at_capacity->oom_trace_index;
      line.passes_oom_point = row.passes_oom_point();
      line.fits = !row.at_capacity->oom && !row.at_capacity->passed_recorded_oom;  // ran the whole trace
    }
    d.whatif.push_back(std::move(line));
  }
  d.ideal_peak_bytes = report.ideal.stats.peak_reserved_bytes;
  if (report.recommended) d.recommended_conf = report.rows[*report.recommended].config.conf;
}

}  // namespace fragscope::diagnose
