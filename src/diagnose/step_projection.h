#pragma once
/// @file step_projection.h
/// @brief Projects the peak of the step that ran out of memory from the steps the trace shows.
///
/// A snapshot taken after an OOM holds the trace up to the failing malloc, not the rest of the
/// failing step. Its peak is projected as
///
///     projected = static + constant + ratio × scaled
///
/// - `static`: live bytes when the failing step began: `allocated_bytes.all.current` of the
///   last telemetry record (the step before the failing one);
/// - the steps before the failing one begin at `step_starts` (else where the curve returns to
///   `static`) and map to the telemetry records newest first; a step's peak is its highest
///   allocation not made by torch/optim code;
/// - the reference step: the step with the highest peak among those sharing a call stack with
///   the failing pass;
/// - its activations: the blocks it allocated itself, live at that peak and freed before its
///   own work ended (allocated back at the lower of its start and end levels). Those
///   the failing step allocated again at the same call stack with the same size (weight casts,
///   workspaces) are `constant`; the rest (activations, logits) are `scaled`;
/// - `ratio`: the failing step's size against the reference step's, measured on the
///   allocations both made at the same call stack (the failing malloc included), a
///   size-weighted median. With telemetry token counts this is the token ratio.
///
/// `returning`: what the failing step runs without and the steps after it hold again (gradients
/// dropped by zero_grad after an optimizer step): blocks live when the reference step began,
/// freed after it ended and not made again (same call stack and size) before the failing step
/// began. `next_step_peak_bytes` = the projected peak + returning.
///
/// The failing step's start in the trace is the last event before the OOM at which allocated
/// bytes were back at `static` (within max(16 MiB, 0.2%)).
/// Thread-safety: pure functions over read-only inputs.

#include <cstddef>
#include <optional>
#include <span>

#include "diagnose/diagnosis.h"
#include "diagnose/recorded_curve.h"
#include "inputs/step_telemetry.h"
#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

/// @brief Tokens a telemetry record processed: `tokens`, else mbs × seq_len, else seq_len.
std::optional<std::int64_t> record_tokens(const inputs::StepRecord& record);

/// @brief The last event before `oom_index` at which `curve` was back at `static_bytes`.
std::optional<std::size_t> find_step_start(const RecordedCurve& curve, std::size_t oom_index,
                                           std::uint64_t static_bytes);

/// @brief Projects the failing step's peak.
/// @param steps telemetry of the rank that failed, in step order (the failing step has no
///        record, or has one: either works).
/// @param request_bytes the failing malloc's (rounded) size.
/// @param step_starts where each step began in the trace, the failing one last (the failing
///        statement's episodes: OomCallPath::episode_starts); empty: found from the curve.
/// @return `available` false with a reason when the inputs cannot support a projection.
StepProjection project_failing_step(const snapshot::Snapshot& snapshot, int device,
                                    const RecordedCurve& curve, std::size_t oom_index,
                                    std::uint64_t request_bytes,
                                    std::span<const inputs::StepRecord> steps,
                                    std::span<const std::size_t> step_starts = {});

}  // namespace fragscope::diagnose
