#pragma once
/// @file doctor_run.h
/// @brief `fragscope doctor` on what was given for one snapshot (the snapshot, and the other
/// artifacts of its folder when a folder was given), on a thread of its own, so the view can
/// mark the verdict at the OOM once it is known.
/// Thread-safety: result() from any thread; `inputs` must outlive the run.

#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "diagnose/diagnosis.h"
#include "diagnose/doctor_inputs.h"

namespace fragscope::view {

struct DoctorOutcome {
  bool done = false;
  std::string error;  ///< when the doctor could not run
  std::shared_ptr<const diagnose::Diagnosis> diagnosis;
};

class DoctorRun {
 public:
  DoctorRun() = default;
  ~DoctorRun();
  DoctorRun(const DoctorRun&) = delete;
  DoctorRun& operator=(const DoctorRun&) = delete;

  /// @brief Starts the doctor on `inputs` (once; later calls do nothing), with `threads` threads
  /// for its what-if sweep.
  void start(const diagnose::DoctorInputs& inputs, unsigned threads);
  DoctorOutcome outcome() const;

 private:
  mutable std::mutex mutex_;
  DoctorOutcome outcome_;
  std::thread thread_;
};

}  // namespace fragscope::view
