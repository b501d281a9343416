#pragma once
/// @file viewed_snapshot.h
/// @brief One snapshot `fragscope view` serves: what was read for it (the doctor's inputs), its
/// index, its what-if curves and its doctor run.
/// Thread-safety: index() and input() are immutable; whatif() and doctor() are safe to call from
/// any thread. Not movable: the parts refer to one another.

#include <string>

#include "diagnose/doctor_inputs.h"
#include "view/doctor_run.h"
#include "view/trace_index.h"
#include "view/whatif_overlay.h"

namespace fragscope::view {

class ViewedSnapshot {
 public:
  /// @param inputs what was read for one path: exactly one snapshot, maybe other artifacts
  ///   (a folder's steps.jsonl, memory_stats) that the doctor reads with it.
  /// @throws InputError naming `name` when `inputs` holds no snapshot or several, or the
  ///   snapshot has no trace to view.
  ViewedSnapshot(std::string name, diagnose::DoctorInputs inputs);
  ViewedSnapshot(const ViewedSnapshot&) = delete;
  ViewedSnapshot& operator=(const ViewedSnapshot&) = delete;

  const std::string& name() const { return name_; }
  const diagnose::SnapshotInput& input() const { return inputs_.snapshots.front(); }
  const TraceIndex& index() const { return index_; }
  WhatIfOverlay& whatif() { return whatif_; }
  /// @brief The doctor's verdict on this snapshot, begun on first use.
  DoctorOutcome doctor(unsigned threads = 1);

 private:
  static diagnose::DoctorInputs one_snapshot(const std::string& name, diagnose::DoctorInputs inputs);

  std::string name_;
  diagnose::DoctorInputs inputs_;
  TraceIndex index_;
  WhatIfOverlay whatif_;
  DoctorRun doctor_;
};

}  // namespace fragscope::view
