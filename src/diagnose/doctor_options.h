#pragma once
/// @file doctor_options.h
/// @brief What the caller of the doctor chooses (doctor.h), shared with the verdict on a traced
/// OOM (traced_oom_verdict.h).

#include <cstddef>

#include "diagnose/traced_oom_findings.h"
#include "util/progress.h"

namespace fragscope::diagnose {

struct DoctorOptions {
  double data_wait_threshold = 0.10;  ///< steady loader-wait share that makes a run input-bound
  unsigned threads = 0;               ///< what-if sweep threads; 0 = all cores
  /// Points of the recorded reserved/allocated curve: enough that zooming into one step of a
  /// long trace still shows its shape (each point keeps its stretch's extremes).
  std::size_t timeline_points = 8192;
  Progress progress;                  ///< hears of the what-if sweep (replay/whatif.h)
  /// Words the verdict on a traced OOM (traced_oom_findings.h says why it is passed in):
  /// report::traced_oom_words. Required when a snapshot's trace holds the OOM.
  TracedOomWording word_traced_oom;
};

}  // namespace fragscope::diagnose
