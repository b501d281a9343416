#pragma once
/// @file doctor.h
/// @brief `fragscope doctor`: from whatever artifacts a team has, one verdict with the evidence
/// that decided it, the context, and ranked actions. docs/doctor.md explains the rules.
///
/// How an OOM is judged (never by "reserved-but-unallocated is large"): with a snapshot whose
/// trace reaches the failing malloc, by replaying it at the same capacity and projecting the
/// failing pass's peak (traced_oom_verdict.h); without one, by what the OOM message's figures
/// prove. Without an OOM: the steady loader-wait share at or above the threshold → input_bound,
/// else ok.
/// Thread-safety: run_doctor runs the what-if sweep on `threads` threads; call it from one.

#include "diagnose/diagnosis.h"
#include "diagnose/doctor_inputs.h"
#include "diagnose/doctor_options.h"

namespace fragscope::diagnose {

/// @brief Diagnoses `inputs`.
/// @throws InputError when nothing usable was given, or a snapshot's trace cannot be replayed.
Diagnosis run_doctor(const DoctorInputs& inputs, const DoctorOptions& options = {});

}  // namespace fragscope::diagnose
