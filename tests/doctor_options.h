#pragma once
// Test support: the doctor's options as the CLI sets them, with the verdict on a traced OOM worded
// by report/traced_oom_words.h.

#include "diagnose/doctor_options.h"
#include "report/traced_oom_words.h"

namespace fragscope::testing {

inline diagnose::DoctorOptions doctor_options() {
  diagnose::DoctorOptions options;
  options.word_traced_oom = report::traced_oom_words;
  return options;
}

}  // namespace fragscope::testing
