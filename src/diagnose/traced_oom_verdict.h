#pragma once
/// @file traced_oom_verdict.h
/// @brief The verdict on an OOM whose snapshot traces the allocator up to the failing malloc:
/// the trace replayed at the same capacity under a sweep of allocator settings and through the
/// ideal packer, the phase of the failing pass, and the projection of its peak (docs/doctor.md
/// gives each rule and evidence key).
///
/// In order: the ideal packer cannot serve the failing malloc → capacity. A pass the recorded
/// steps never ran (eval, checkpoint, the first optimizer step) → undetermined, but for an
/// optimizer step whose foreach op provably needs more than the device gives (capacity). A
/// training step →
/// its projected peak (at requested sizes when the recorded setting rounds up and the best does
/// not) above the capacity, or the next step's with the gradients it gets back above it →
/// capacity; within 2% below it → undetermined; below → fragmentation. Every rule, those of a
/// step or eval pass projected from the trace alone included: TracedOomRule (traced_oom_findings.h).
/// Thread-safety: runs the what-if sweep on options.threads threads; call it from one.

#include <cstddef>
#include <optional>

#include "diagnose/diagnosis.h"
#include "diagnose/doctor_inputs.h"
#include "diagnose/doctor_options.h"
#include "diagnose/recorded_curve.h"

namespace fragscope::diagnose {

/// @brief The snapshot that holds the OOM (or the longest trace when there was none), on its
/// busiest device.
struct TraceChoice {
  const SnapshotInput* replay = nullptr;  ///< the longest trace: counterfactual and timeline
  const SnapshotInput* map = nullptr;     ///< the one nearest to the OOM moment: segment map
  int device = 0;
  std::optional<std::size_t> oom_index;      ///< last `oom` entry in `replay`'s trace
  std::optional<std::size_t> map_oom_index;  ///< the same entry in `map`'s trace
};

/// @brief Decides the OOM at trace.oom_index, filling d's capacity, what-if lines, phase and
/// projections; what it found goes into a TracedOomFindings (traced_oom_findings.h), which
/// options.word_traced_oom words as d's trigger, evidence and (when undetermined) what would
/// decide it.
/// `telemetry` (may be null) is the failing rank's step records; `curve` the recorded
/// reserved/allocated curve of trace.replay's trace.
/// REQUIRES: trace.replay and trace.oom_index are set; d.oom_context is set.
/// @throws InputError when the trace cannot be replayed; std::logic_error without
/// options.word_traced_oom.
Verdict judge_traced_oom(const TraceChoice& trace, const TelemetryInput* telemetry, const RecordedCurve& curve,
                         const DoctorOptions& options, Diagnosis& d);

}  // namespace fragscope::diagnose
