#pragma once
/// @file recorded_curve.h
/// @brief The recorded allocated and reserved bytes after every event of one device's trace,
/// walked from the trace itself (no replay): what the real allocator held, moment by moment.
///
/// Allocated bytes here are the callers' requested sizes (the trace records those): within a
/// few KiB per live block of `allocated_bytes.all.current`, which counts rounded blocks. A
/// block counts as allocated from its `alloc` to its `free_completed`. When the trace starts
/// mid-run, the starting levels are the end-state totals minus the trace's net change.
/// Thread-safety: plain values and pure functions.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

struct RecordedCurve {
  std::vector<std::uint64_t> allocated;  ///< after event i, requested bytes of live blocks
  std::vector<std::uint64_t> reserved;   ///< after event i, bytes of mapped segments
};

/// @brief Walks `device`'s trace of `snapshot`. Empty vectors when it has no trace.
RecordedCurve walk_recorded_curve(const snapshot::Snapshot& snapshot, int device);

/// @brief The maxima and minima of `curve` over `points` equal stretches of the trace (fewer
/// when the trace is shorter), with each stretch's last event index: a spike of one event
/// survives any downsampling, and so does a dip.
struct CurvePoint {
  std::size_t trace_index = 0;
  std::uint64_t reserved = 0;
  std::uint64_t allocated = 0;
  std::uint64_t reserved_min = 0;
  std::uint64_t allocated_min = 0;
};
std::vector<CurvePoint> downsample_curve(const RecordedCurve& curve, std::size_t points);

}  // namespace fragscope::diagnose
