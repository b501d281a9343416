#pragma once
/// @file plan_report.h
/// @brief `fragscope plan` output: a per-GPU table that explains every figure (in the manner of
/// tcmalloc's stats page), the proposals table, the canary plan, and the same as one JSON object.
///
/// JSON keys (docs/plan.md): peak_allocated_bytes, peak_reserved_bytes, device_bytes,
/// usable_bytes, fits, margin_bytes, peak_phase, headroom_fraction, activations_per_layer_bytes,
/// breakdown {name: bytes}, phases [{phase, bytes}], job {…}, and "proposals" / "canary" when
/// asked for.

#include <ostream>

#include "plan/canary_plan.h"
#include "plan/job_spec.h"
#include "plan/memory_model.h"
#include "plan/proposals.h"

namespace fragscope::report {

/// @brief The estimate as text. `proposals` and `canary` may be null.
void write_plan_text(std::ostream& out, const plan::JobSpec& spec, const plan::MemoryEstimate& estimate,
                     const plan::ProposalSet* proposals, const plan::CanaryPlan* canary);

/// @brief The estimate as one JSON object (one line per key, two-space indent).
void write_plan_json(std::ostream& out, const plan::JobSpec& spec, const plan::MemoryEstimate& estimate,
                     const plan::ProposalSet* proposals, const plan::CanaryPlan* canary);

}  // namespace fragscope::report
