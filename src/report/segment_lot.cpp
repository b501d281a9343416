#include "report/segment_lot.h"

#include <algorithm>
#include <bit>

namespace fragscope::report {
namespace {

using metrics::RunKind;
using metrics::SegmentRow;

std::uint64_t pending_of(const SegmentRow& row) {
  std::uint64_t pending = 0;
  for (const auto& run : row.runs)
    if (run.kind == RunKind::kPendingFree) pending += run.size;
  return pending;
}

bool is_private(const SegmentRow& row) { return row.pool_id != std::pair<std::int64_t, std::int64_t>{0, 0}; }

void add_to(LotSlot& slot, const SegmentRow& row) {
  slot.segments += 1;
  slot.total_bytes += row.total_size;
  slot.free_bytes += row.free_bytes;
  slot.pending_free_bytes += pending_of(row);
  slot.largest_free_bytes = std::max(slot.largest_free_bytes, row.largest_free);
  slot.smallest_segment_bytes =
      slot.segments == 1 ? row.total_size : std::min(slot.smallest_segment_bytes, row.total_size);
  slot.largest_segment_bytes = std::max(slot.largest_segment_bytes, row.total_size);
}

}  // namespace

SegmentTotals segment_totals(std::span<const SegmentRow> rows) {
  SegmentTotals t;
  for (const SegmentRow& row : rows) {
    t.segments += 1;
    t.reserved_bytes += row.total_size;
    t.free_bytes += row.free_bytes;
    t.pending_free_bytes += pending_of(row);
    t.largest_free_bytes = std::max(t.largest_free_bytes, row.largest_free);
  }
  return t;
}

SegmentLot arrange_segment_lot(std::span<const SegmentRow> rows, std::size_t resolution) {
  SegmentLot lot;
  lot.totals = segment_totals(rows);
  std::vector<const SegmentRow*> order;
  for (const SegmentRow& row : rows) order.push_back(&row);
  std::stable_sort(order.begin(), order.end(), [](const SegmentRow* a, const SegmentRow* b) {
    if (a->total_size != b->total_size) return a->total_size > b->total_size;
    return a->free_bytes > b->free_bytes;  // among equals, the emptier first
  });
  const std::uint64_t visible = lot.totals.reserved_bytes / std::max<std::size_t>(1, resolution);
  std::vector<const SegmentRow*> first_of_slot;
  for (const SegmentRow* row : order) {
    const bool small = row->total_size < visible;
    LotSlot* group = lot.slots.empty() ? nullptr : &lot.slots.back();
    const bool joins =
        small && group && !group->row && group->private_pool == is_private(*row) && group->total_bytes < visible;
    if (!joins) {
      lot.slots.push_back({});
      first_of_slot.push_back(row);
      group = &lot.slots.back();
      group->private_pool = is_private(*row);
      group->row = small ? nullptr : row;
    }
    add_to(*group, *row);
  }
  for (std::size_t i = 0; i < lot.slots.size(); ++i)  // a group of one is that segment
    if (lot.slots[i].segments == 1) lot.slots[i].row = first_of_slot[i];

  std::vector<std::uint64_t> hole_sizes;
  for (const SegmentRow& row : rows)
    for (const auto& run : row.runs)
      if (run.kind == RunKind::kFree && run.size > 0) hole_sizes.push_back(run.size);
  if (hole_sizes.empty()) return lot;
  const auto [smallest, largest] = std::minmax_element(hole_sizes.begin(), hole_sizes.end());
  // Bucket k holds sizes in [2^k, 2^(k+1)): k is the size's bit width less one.
  const auto first = static_cast<std::size_t>(std::bit_width(*smallest)) - 1;
  const auto last = static_cast<std::size_t>(std::bit_width(*largest)) - 1;
  for (std::size_t k = first; k <= last; ++k)
    lot.holes.push_back({std::uint64_t{1} << k, k >= 63 ? UINT64_MAX : std::uint64_t{1} << (k + 1), 0, 0});
  for (const std::uint64_t size : hole_sizes) {
    HoleBucket& bucket = lot.holes[static_cast<std::size_t>(std::bit_width(size)) - 1 - first];
    bucket.holes += 1;
    bucket.bytes += size;
  }
  return lot;
}

}  // namespace fragscope::report
