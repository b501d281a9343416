#pragma once
/// @file step_alignment.h
/// @brief Where each step of the telemetry ended in a snapshot's trace, so that a picture of
/// the trace can say "step 12" instead of "event 48213".
///
/// The telemetry's clock (`t`: seconds since the run started) and the trace's (`time_us`:
/// µs since the epoch) differ by one unknown offset. A record is written after the step
/// synchronised and read memory_stats: at that moment the allocator held exactly the record's
/// `reserved_bytes.all.current` and `requested_bytes.all.current` (what the recorded curve
/// counts, recorded_curve.h), and nothing changes until the next step allocates. Each event
/// where the curve equals the first usable record's figures proposes an offset; the offset
/// under which the most records find their figures within a few events of their time wins.
/// A record then sits at the event that holds its figures, or, when none near does (its
/// figures were not written, or another thread allocated), at the last event before its time.
/// Nothing is aligned when the trace records no time, the records no `t`, or no offset places
/// at least half of the records that carry figures (and two, when two or more carry them).
/// Thread-safety: a pure function.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "diagnose/recorded_curve.h"
#include "inputs/step_telemetry.h"
#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

struct AlignedStep {
  std::size_t record = 0;       ///< index into the records
  std::size_t trace_index = 0;  ///< the step's last event
  bool by_figures = false;      ///< placed by its memory figures (else by its time alone)
};

/// @brief The records' step ends in `trace` (whose curve is `curve`), in record order; empty
/// when they cannot be aligned (see above).
std::vector<AlignedStep> align_steps_to_trace(std::span<const inputs::StepRecord> records,
                                              std::span<const snapshot::TraceEvent> trace,
                                              const RecordedCurve& curve);

}  // namespace fragscope::diagnose
