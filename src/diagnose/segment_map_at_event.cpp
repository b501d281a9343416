#include "diagnose/segment_map_at_event.h"

#include <algorithm>
#include <iterator>
#include <map>

namespace fragscope::diagnose {
namespace {

using metrics::RunKind;
using metrics::SegmentRow;
using metrics::SegmentRun;
using snapshot::TraceAction;

constexpr std::uint64_t kMinBlockSize = 512;

std::uint64_t block_extent(std::uint64_t requested) {
  return std::max(kMinBlockSize, (requested + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize);
}

/// Sets [offset, offset + size) of `row` to `kind`, merging equal neighbours.
void set_range(SegmentRow& row, std::uint64_t offset, std::uint64_t size, RunKind kind,
               std::uint64_t requested) {
  if (offset >= row.total_size) return;
  const std::uint64_t end = std::min(row.total_size, offset + size);
  std::vector<SegmentRun> runs;
  for (const SegmentRun& run : row.runs) {
    const std::uint64_t run_end = run.offset + run.size;
    if (run_end <= offset || run.offset >= end) {
      runs.push_back(run);
      continue;
    }
    if (run.offset < offset) runs.push_back({run.kind, run.offset, offset - run.offset, 0});
    if (runs.empty() || runs.back().offset + runs.back().size <= offset)
      runs.push_back({kind, offset, end - offset, kind == RunKind::kAllocated ? requested : 0});
    if (run_end > end) runs.push_back({run.kind, end, run_end - end, 0});
  }
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  row.runs.clear();
  for (const SegmentRun& run : runs) {
    if (!row.runs.empty() && row.runs.back().kind == run.kind &&
        row.runs.back().offset + row.runs.back().size == run.offset) {
      row.runs.back().size += run.size;
      row.runs.back().requested += run.requested;
    } else {
      row.runs.push_back(run);
    }
  }
}

using RowMap = std::map<std::uint64_t, SegmentRow>;

/// The row whose range holds `address`, or end().
RowMap::iterator row_holding(RowMap& rows, std::uint64_t address) {
  auto it = rows.upper_bound(address);
  if (it == rows.begin()) return rows.end();
  --it;
  return address < it->first + it->second.total_size ? it : rows.end();
}

void mark(RowMap& rows, const snapshot::TraceEvent& event, RunKind kind) {
  const auto it = row_holding(rows, event.addr);
  if (it == rows.end()) return;
  set_range(it->second, event.addr - it->first, block_extent(event.size), kind, event.size);
}

void add_free_row(RowMap& rows, std::uint64_t address, std::uint64_t size) {
  SegmentRow row;
  row.address = address;
  row.total_size = size;
  row.runs.push_back({RunKind::kFree, 0, size, 0});
  rows[address] = std::move(row);
}

void undo_map(RowMap& rows, const snapshot::TraceEvent& event) {
  const auto it = row_holding(rows, event.addr);
  if (it == rows.end()) return;
  SegmentRow& row = it->second;
  if (event.addr == it->first && event.size >= row.total_size) {
    rows.erase(it);
  } else if (event.addr + event.size >= it->first + row.total_size) {  // the mapped tail
    const std::uint64_t keep = event.addr - it->first;
    std::erase_if(row.runs, [&](const SegmentRun& run) { return run.offset >= keep; });
    if (!row.runs.empty()) row.runs.back().size = std::min(row.runs.back().size, keep - row.runs.back().offset);
    row.total_size = keep;
  }
}

void undo_unmap(RowMap& rows, const snapshot::TraceEvent& event) {
  for (auto& [address, row] : rows) {
    if (address + row.total_size == event.addr) {  // grow the run of mapped pages back
      row.total_size += event.size;
      set_range(row, event.addr - address, event.size, RunKind::kFree, 0);
      return;
    }
  }
  add_free_row(rows, event.addr, event.size);
}

void finish(SegmentRow& row) {
  row.free_bytes = 0;
  row.largest_free = 0;
  for (const SegmentRun& run : row.runs) {
    if (run.kind != RunKind::kFree) continue;
    row.free_bytes += run.size;
    row.largest_free = std::max(row.largest_free, run.size);
  }
}

}  // namespace

std::vector<SegmentRow> segment_map_at_event(const snapshot::Snapshot& snapshot, int device,
                                             std::size_t trace_index) {
  RowMap rows;
  for (SegmentRow& row : metrics::build_segment_map(snapshot, device)) rows[row.address] = std::move(row);
  const auto trace = snapshot.trace(device);
  for (std::size_t i = trace.size(); i-- > trace_index + 1;) {
    const snapshot::TraceEvent& event = trace[i];
    switch (event.action) {
      case TraceAction::kFreeCompleted: mark(rows, event, RunKind::kPendingFree); break;
      case TraceAction::kFreeRequested: mark(rows, event, RunKind::kAllocated); break;
      case TraceAction::kAlloc: mark(rows, event, RunKind::kFree); break;
      case TraceAction::kSegmentAlloc: rows.erase(event.addr); break;
      case TraceAction::kSegmentFree: add_free_row(rows, event.addr, event.size); break;
      case TraceAction::kSegmentMap: undo_map(rows, event); break;
      case TraceAction::kSegmentUnmap: undo_unmap(rows, event); break;
      default: break;
    }
  }
  std::vector<SegmentRow> result;
  result.reserve(rows.size());
  for (auto& [address, row] : rows) {
    finish(row);
    result.push_back(std::move(row));
  }
  return result;
}

}  // namespace fragscope::diagnose
