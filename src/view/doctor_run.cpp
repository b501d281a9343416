#include "view/doctor_run.h"

#include <exception>

#include "diagnose/doctor.h"
#include "report/traced_oom_words.h"

namespace fragscope::view {

DoctorRun::~DoctorRun() {
  if (thread_.joinable()) thread_.join();
}

void DoctorRun::start(const diagnose::DoctorInputs& inputs, unsigned threads) {
  if (thread_.joinable()) return;
  thread_ = std::thread([this, &inputs, threads] {
    DoctorOutcome outcome;
    try {
      diagnose::DoctorOptions options;
      options.threads = threads;
      options.word_traced_oom = report::traced_oom_words;
      outcome.diagnosis = std::make_shared<const diagnose::Diagnosis>(diagnose::run_doctor(inputs, options));
    } catch (const std::exception& e) {
      outcome.error = e.what();
    }
    outcome.done = true;
    std::lock_guard lock(mutex_);
    outcome_ = std::move(outcome);
  });
}

DoctorOutcome DoctorRun::outcome() const {
  std::lock_guard lock(mutex_);
  return outcome_;
}

}  // namespace fragscope::view
