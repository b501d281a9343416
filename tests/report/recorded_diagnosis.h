#pragma once
// Test support for the doctor renderers: the doctor's diagnosis of a recorded fixture, from the
// files a user would have (snapshot, telemetry, stats, nvidia-smi, summary, the OOM log),
// computed once per test binary.

#include <map>
#include <string>

#include "../diagnose/doctor_fixture_files.h"
#include "diagnose/doctor.h"
#include "../doctor_options.h"

namespace fragscope::testing {

inline const diagnose::Diagnosis& recorded_diagnosis(const std::string& scenario) {
  static std::map<std::string, diagnose::Diagnosis> cache;
  auto it = cache.find(scenario);
  if (it == cache.end()) {
    diagnose::DoctorOptions options = fragscope::testing::doctor_options();
    options.threads = 2;
    it = cache
             .emplace(scenario,
                      diagnose::run_doctor(diagnose::collect_doctor_inputs(doctor_user_files(scenario)), options))
             .first;
  }
  return it->second;
}

}  // namespace fragscope::testing
