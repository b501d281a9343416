#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "report/analyze_report.h"
#include "util/bytes.h"
#include "util/shown_text.h"

namespace fragscope::report {

namespace {

char cell_char(const metrics::SegmentRow& row, std::uint64_t begin, std::uint64_t end) {
  std::uint64_t bytes[3] = {0, 0, 0};  // allocated, pending, free
  for (const auto& run : row.runs) {
    const std::uint64_t lo = std::max(begin, run.offset), hi = std::min(end, run.offset + run.size);
    if (lo < hi) bytes[static_cast<int>(run.kind)] += hi - lo;
  }
  const auto most = std::max_element(std::begin(bytes), std::end(bytes)) - std::begin(bytes);
  static constexpr char kChars[] = {'#', '-', '.'};
  return kChars[most];
}

void write_segment_map(const metrics::SnapshotAnalysis& a, const AnalyzeTextOptions& o, std::ostream& out) {
  std::vector<const metrics::SegmentRow*> rows;
  for (const auto& row : a.segment_map) rows.push_back(&row);
  std::stable_sort(rows.begin(), rows.end(), [](auto* x, auto* y) { return x->total_size > y->total_size; });
  const std::size_t shown = o.map_rows == 0 ? rows.size() : std::min(rows.size(), o.map_rows);
  fmt::print(out,
             "\nSegment map ({} largest of {} segments; each row one segment: # allocated, - pending free, . free)\n",
             shown, rows.size());
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& row = *rows[i];
    std::string cells(o.map_width, '.');
    for (std::size_t c = 0; c < o.map_width; ++c)
      cells[c] = cell_char(row, row.total_size * c / o.map_width, row.total_size * (c + 1) / o.map_width);
    fmt::print(out, "  0x{:012x} {:>11} |{}| free {:>11}, largest {}{}\n", row.address,
               format_bytes(row.total_size), cells, format_bytes(row.free_bytes), format_bytes(row.largest_free),
               row.pool_id == std::pair<std::int64_t, std::int64_t>{0, 0}
                   ? ""
                   : fmt::format("; private pool ({}, {})", row.pool_id.first, row.pool_id.second));
  }
  if (shown < rows.size()) {
    std::uint64_t rest = 0, rest_free = 0;
    for (std::size_t i = shown; i < rows.size(); ++i) {
      rest += rows[i]->total_size;
      rest_free += rows[i]->free_bytes;
    }
    fmt::print(out, "  ... {} smaller segments: {} reserved, {} free\n", rows.size() - shown,
               format_bytes(rest), format_bytes(rest_free));
  }
}

}  // namespace

void write_analyze_text(std::ostream& out, const metrics::SnapshotAnalysis& a, const std::string& source,
                        const AnalyzeTextOptions& o) {
  const auto& t = a.totals;
  // Which device, and why this one, once there is a choice (or it is not the usual device 0).
  const bool say_why = a.device_picked && (a.device != 0 || a.devices.size() > 1);
  fmt::print(out, "fragscope analyze: {} (device {}{}{})\n", shown_name(source, kShownPathBytes), a.device,
             a.devices.size() > 1 ? fmt::format(" of {}", a.devices.size()) : "",
             say_why ? ", the one holding the memory; --device picks another" : "");
  fmt::print(out, "\nMemory held by PyTorch's caching allocator\n");
  fmt::print(out, "  reserved               {:>11}  in {} segments, {} blocks{}\n", format_bytes(t.reserved_bytes),
             t.segments, t.blocks, a.expandable_segments ? fmt::format(" ({} expandable)", a.expandable_segments) : "");
  fmt::print(out, "  allocated (rounded)    {:>11}\n", format_bytes(t.allocated_bytes));
  fmt::print(out, "    requested by tensors {:>11}\n", format_bytes(t.requested_bytes));
  fmt::print(out, "    internal free        {:>11}  (rounding inside live blocks)\n",
             format_bytes(t.free_internal_bytes));
  fmt::print(
      out, "  external free          {:>11}  (gaps between live blocks{})\n", format_bytes(t.free_external_bytes),
      t.pending_free_bytes ? fmt::format("; {} waiting on stream events", format_bytes(t.pending_free_bytes)) : "");
  fmt::print(out, "    largest free block   {:>11}  of {} in {} free blocks\n", format_bytes(t.largest_free_block),
             format_bytes(t.inactive_bytes), t.inactive_blocks);
  fmt::print(out, "    fragmentation index  {:>11.3f}  (1 - largest free / total free; 0 = one hole)\n",
             t.fragmentation_index());

  fmt::print(out, "\nWhat nvidia-smi cannot see\n");
  fmt::print(out, "  nvidia-smi counts all {} reserved as used; {} of it is free inside PyTorch's cache.\n",
             format_bytes(t.reserved_bytes), format_bytes(t.inactive_bytes));
  if (a.private_pools.reserved_bytes)
    fmt::print(out, "  {} of it is reserved by private pools (CUDA graphs, MemPools), {} of that free: it serves "
                    "only their own allocations.\n",
               format_bytes(a.private_pools.reserved_bytes), format_bytes(a.private_pools.inactive_bytes));
  if (a.driver_free_bytes)
    fmt::print(out, "  nvidia-smi would show {} free (the driver's reading at the OOM).\n",
               format_bytes(*a.driver_free_bytes));
  fmt::print(out, "  The largest allocation that can succeed right now from the cache: {}{}.\n",
             format_bytes(a.largest_cached_allocation),
             a.driver_free_bytes
                 ? fmt::format("; a new cudaMalloc could add at most {}", format_bytes(*a.driver_free_bytes))
                 : "");
  for (const auto& oom : a.trace.ooms) {
    const bool fits_total = oom.request_bytes <= t.inactive_bytes;
    fmt::print(
        out, "  The failed request was {}: {}.\n", format_bytes(oom.request_bytes),
        oom.request_bytes > a.largest_cached_allocation && fits_total
            ? fmt::format("larger than any free block although {} is free in total", format_bytes(t.inactive_bytes))
            : (fits_total ? "a free block of that size exists now (freed after the OOM)"
                          : "more than all free memory together"));
  }

  if (a.by_pool_stream.size() > 0) {
    fmt::print(out, "\nBy pool and stream (blocks are reused only within both)\n");
    fmt::print(out, "  {:<13} {:>16} {:>11} {:>11} {:>11} {:>11} {:>6}\n", "pool", "stream", "reserved",
               "allocated", "free", "largest", "frag");
    for (const auto& g : a.by_pool_stream)
      fmt::print(out, "  {:<13} {:>16} {:>11} {:>11} {:>11} {:>11} {:>6.3f}\n",
                 fmt::format("{}{}", g.pool == snapshot::PoolKind::kSmall ? "small" : "large",
                             g.mem_pool == std::pair<std::int64_t, std::int64_t>{0, 0}
                                 ? ""
                                 : fmt::format(" ({},{})", g.mem_pool.first, g.mem_pool.second)),
                 g.stream == 0 ? std::string("0 (default)") : fmt::format("0x{:x}", g.stream),
                 format_bytes(g.totals.reserved_bytes), format_bytes(g.totals.allocated_bytes),
                 format_bytes(g.totals.inactive_bytes), format_bytes(g.totals.largest_free_block),
                 g.totals.fragmentation_index());
  }

  write_segment_map(a, o, out);

  if (!a.top_sites.empty()) {
    fmt::print(out, "\nTop allocation sites (live bytes)\n");
    for (const auto& s : a.top_sites)
      fmt::print(out, "  {:>11} {:>6} blocks  {}\n", format_bytes(s.bytes), s.blocks, s.location);
  }

  fmt::print(out, "\nTrace: {} events", a.trace.entries);
  if (a.trace.last_time_us > a.trace.first_time_us)
    fmt::print(out, " over {:.2f} s", static_cast<double>(a.trace.last_time_us - a.trace.first_time_us) / 1e6);
  fmt::print(out, "\n");
  if (a.trace.entries > 0) {
    std::string line;
    for (const auto& [name, count] : a.trace.actions) line += fmt::format("  {} {}", name, count);
    fmt::print(out, " {}\n", line);
    fmt::print(out, "  reserved: {} when the trace starts, peak {} within it\n",
               format_signed_bytes(a.reserved_at_trace_start), format_signed_bytes(a.trace_peak_reserved));
  }
  for (const auto& oom : a.trace.ooms)
    fmt::print(out, "  OOM at event {}: request {}, driver free {}\n", oom.index,
               format_bytes(oom.request_bytes), format_bytes(oom.device_free_bytes));
}

}  // namespace fragscope::report
