#pragma once
/// @file library_failure.h
/// @brief The verdict when a log shows a CUDA library failing to get device memory of its own
/// (inputs/library_alloc_failure.h) and nothing shows a PyTorch OOM.
///
/// The log says which library and call failed, not what PyTorch held then: its cached blocks,
/// which it would have freed for its own retry but not for the library, or its tensors. A
/// snapshot given with the log (none of its entries an `oom`: dumped where the RuntimeError was
/// caught) shows both at its end, not what the rest of the step would need. The verdict stays
/// undetermined, with what would decide it and what makes room either way.
/// Thread-safety: a pure function.

#include "diagnose/diagnosis.h"
#include "diagnose/doctor_inputs.h"

namespace fragscope::diagnose {

/// @brief Fills d's library_failure, phase, trigger, evidence and decide_with from the last
/// failure of the last log that has one; returns Verdict::kUndetermined.
/// REQUIRES: !in.library_failures.empty().
Verdict judge_library_failure(const DoctorInputs& in, Diagnosis& d);

}  // namespace fragscope::diagnose
