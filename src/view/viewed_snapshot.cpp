#include "view/viewed_snapshot.h"

#include <fmt/format.h>

#include "util/error.h"

namespace fragscope::view {

diagnose::DoctorInputs ViewedSnapshot::one_snapshot(const std::string& name, diagnose::DoctorInputs inputs) {
  if (inputs.snapshots.empty() && !inputs.skipped.empty()) {  // the reader's own reason, not a guess
    throw InputError(fmt::format("{}: {}", inputs.skipped.front().path, inputs.skipped.front().reason));
  }
  if (inputs.snapshots.empty()) throw InputError(fmt::format("{}: not a memory snapshot (nothing to view)", name));
  if (inputs.snapshots.size() > 1) {
    throw InputError(fmt::format("{}: holds {} snapshots; give each one as its own argument", name,
                                 inputs.snapshots.size()));
  }
  return inputs;
}

ViewedSnapshot::ViewedSnapshot(std::string name, diagnose::DoctorInputs inputs)
    : name_(std::move(name)),
      inputs_(one_snapshot(name_, std::move(inputs))),
      index_(inputs_.snapshots.front().snapshot, inputs_.snapshots.front().device, name_),
      whatif_(inputs_.snapshots.front().snapshot, inputs_.snapshots.front().device, name_) {}

DoctorOutcome ViewedSnapshot::doctor(unsigned threads) {
  doctor_.start(inputs_, threads);
  return doctor_.outcome();
}

}  // namespace fragscope::view
