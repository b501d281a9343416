#pragma once
/// @file trace_projection.h
/// @brief The rest of the failing step, synthesised from earlier steps of the same trace,
/// without step telemetry: a trace to replay through any allocator setting at the capacity.
///
/// The units are the program's repeating steps (trace_units.h). In order:
/// - *kinds*: units of the failing unit's kind began with as many blocks live, within
///   max(8, 5%) (after an optimizer step with zero_grad(set_to_none=True) a micro-step starts
///   without gradients; the next one with them);
/// - *alignment*: the failing unit's allocations up to the failing malloc against each earlier
///   unit's, by call stack (sequence_alignment.h); a unit aligns when the failing malloc has a
///   counterpart, at least 90% of the prefix's bytes do, and some matched pair is 1 MiB or more
///   (smaller sizes are rounding; a prefix of them does not tell the size);
/// - *scale*: the failing unit's sizes against the unit's over matched allocations: the most
///   common ratio by bytes (sequence length, batch or image area); the *reference* is the
///   aligned unit of the failing unit's kind with the scale nearest 1 (the least
///   extrapolation), or of another kind when none of its own aligns, the difference of the
///   bytes live when each began then being `kind_difference_bytes`;
/// - *fit*: how each of the reference's allocations depends on the scale, from the other units
///   aligned with it: size ∝ scale^e, e the median of log(size ratio) / log(unit scale ratio)
///   over them, within [0, 2] (0 constant, 1 linear, 2 quadratic: a workspace that an
///   algorithm search sized otherwise is bounded so); allocations no other unit tells are taken
///   as linear and counted as `unfitted`. The fit is checked on the earlier units themselves:
///   each one's peak projected from the reference (leaving its own sizes out of the fit) against
///   its real peak (`fit_error`);
/// - *synthesis*: the recorded operations up to the failing malloc, the failing malloc served,
///   then the reference's operations after its counterpart up to the next unit, with scaled
///   sizes; a free of a block the reference had before that point frees the failing unit's
///   counterpart (by alignment within the unit; by call stack and recency before it), or is
///   dropped and counted (`unmatched_free_bytes`). Earlier recorded OOM entries (a caught
///   failure such as cuDNN's workspace search) are left out;
/// - *doubts*: what the synthesised peak may be above the truth by (`over_bytes`: frees without a
///   counterpart, a reference that began holding less — as much of that difference as the
///   long-lived blocks its rest made before the projected peak, still held where it ends —,
///   unfitted allocations had they been constant) or below it (`under_bytes`: a reference that
///   began holding more, unfitted ones had they been quadratic); and, when the failing unit is of
///   the reference's kind and the unit after the reference began higher, by how much
///   (`next_unit_extra_bytes`).
/// Thread-safety: a pure function over read-only inputs.

#include <cstddef>
#include <cstdint>
#include <functional>

#include "diagnose/diagnosis.h"
#include "diagnose/recorded_curve.h"
#include "diagnose/trace_units.h"
#include "replay/prepared_trace.h"
#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

/// @brief The projection's figures and the trace to replay.
struct ProjectedStep {
  TraceStepProjection figures;        ///< runs and uncertainty left for the caller to fill
  replay::PreparedTrace trace;        ///< recorded ops to the failing malloc, then the projected rest
  std::size_t projected_from_op = 0;  ///< index in trace.ops of the failing malloc, now served
  /// The live peak of a step like the failing one with every size `factor` × the failing unit's
  /// (as each follows the scale in the fit), begun as the failing unit began and projected from
  /// the reference as a whole (at 1, close to the peak of `trace` with perfect packing); empty
  /// when not projected. Reads the snapshot's trace: valid while the snapshot lives.
  std::function<std::uint64_t(double factor)> peak_at_factor;
};

/// @brief The failing malloc served, and where the synthetic operations after it end their
/// segment events and address hints (they add none).
struct SyntheticStart {
  replay::Op served;
  std::uint32_t segment_end = 0;
  std::uint32_t hint_end = 0;
};

/// @brief Starts step.trace as `prepared`'s starting state and its operations before op
/// `oom_op` (the failing malloc; earlier OOM entries the run died of left out), then that malloc
/// served in a new slot (prepared.slot_count). Sets step.projected_from_op.
SyntheticStart start_synthetic_trace(const replay::PreparedTrace& prepared, std::uint32_t oom_op, ProjectedStep& step);

/// @brief Projects the failing unit's rest. `prepared` is prepare_trace of the same device.
/// @return figures.available false, with a reason, when no earlier unit supports it.
ProjectedStep project_step_from_trace(const replay::PreparedTrace& prepared, const snapshot::Snapshot& snapshot,
                                      int device, const RecordedCurve& curve, std::size_t oom_index,
                                      const TraceUnits& units);

}  // namespace fragscope::diagnose
