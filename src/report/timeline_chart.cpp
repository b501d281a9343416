#include "report/timeline_chart.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "util/bytes.h"

namespace fragscope::report {

using replay::TimelinePoint;

void write_timeline_chart(std::ostream& out, std::span<const TimelinePoint> points, int rows) {
  if (points.empty() || rows <= 0) return;
  std::uint64_t top = 0;
  for (const TimelinePoint& p : points) top = std::max(top, p.reserved);
  if (top == 0) return;
  const std::string top_label = format_bytes(top);
  const std::size_t label_width = std::max<std::size_t>(top_label.size(), 6);
  for (int row = rows; row >= 1; --row) {
    // A cell is filled when the value reaches the middle of its band.
    const double level = (static_cast<double>(row) - 0.5) / rows * static_cast<double>(top);
    std::string line;
    for (const TimelinePoint& p : points) {
      if (static_cast<double>(p.allocated) >= level) {
        line += "█";
      } else if (static_cast<double>(p.reserved) >= level) {
        line += "░";
      } else {
        line += ' ';
      }
    }
    const std::string label = row == rows ? top_label : (row == 1 ? std::string("0") : "");
    out << fmt::format("  {:>{}} ┤{}\n", label, label_width, line);
  }
  out << fmt::format("  {:>{}} └{}\n", "", label_width, std::string(points.size(), '-'));
  out << fmt::format("  {:>{}}  event {} … {}   █ allocated  ░ reserved (cached)\n", "",
                     label_width, points.front().first_trace_index, points.back().last_trace_index);
}

}  // namespace fragscope::report
