#pragma once
/// @file traced_oom_words.h
/// @brief The verdict on a traced OOM in words: each fact of its record
/// (diagnose/traced_oom_findings.h) as one line of evidence, the trigger, how the phase was told,
/// what would decide it (docs/doctor.md lists every evidence key). The doctor takes it through
/// DoctorOptions::word_traced_oom.
/// Thread-safety: a pure function.

#include "diagnose/traced_oom_findings.h"

namespace fragscope::report {

/// @brief Words `findings`; the evidence in the order the verdict found it.
diagnose::TracedOomWords traced_oom_words(const diagnose::TracedOomFindings& findings);

}  // namespace fragscope::report
