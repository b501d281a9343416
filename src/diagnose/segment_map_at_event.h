#pragma once
/// @file segment_map_at_event.h
/// @brief The allocator's segments as they were right after one trace event (the OOM),
/// rebuilt from the end-state segments by undoing the trace's later events.
///
/// A snapshot taken in the `except` handler shows the memory after the failed step's tensors
/// were freed; the picture that explains the OOM is the one at the `oom` entry. Undoing an
/// event: `free_completed`/`free_requested` make the block allocated again, `alloc` frees
/// it, `segment_free` brings the (then wholly free) segment back, `segment_alloc` removes it,
/// `segment_unmap`/`segment_map` grow or shrink an expandable segment's mapped range. Blocks
/// are placed at the traced address with the size rounded to 512 bytes; a block the real
/// allocator left unsplit (up to 1 MiB larger) shows as a small free run beside it.
/// Thread-safety: a pure function.

#include <cstddef>
#include <vector>

#include "metrics/segment_map.h"
#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

/// @brief Rows (address order) of `device`'s segments right after event `trace_index`.
/// REQUIRES: trace_index < snapshot.trace(device).size().
std::vector<metrics::SegmentRow> segment_map_at_event(const snapshot::Snapshot& snapshot, int device,
                                                      std::size_t trace_index);

}  // namespace fragscope::diagnose
