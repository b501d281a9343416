#pragma once
// Test support: the field recordings of tests/data/field (third-party training code recorded on
// the H200 as its users record it): the files a user has, and the snapshot with its OOM.

#include <filesystem>
#include <string>
#include <vector>

#include "snapshot/snapshot.h"
#include "snapshot/snapshot_reader.h"
#include "snapshot/trace_action.h"

namespace fragscope::testing {

inline std::filesystem::path field_dir(const std::string& name) {
  return std::filesystem::path(FRAGSCOPE_SOURCE_DIR) / "tests" / "data" / "field" / name;
}

/// What the job's user has: the snapshot it dumped and its log (truth.json is not theirs).
inline std::vector<std::string> field_user_files(const std::string& name) {
  return {(field_dir(name) / "oom_snapshot.pickle.zst").string(), (field_dir(name) / "train.log").string()};
}

inline snapshot::Snapshot read_field_snapshot(const std::string& name) {
  return snapshot::read_snapshot_file((field_dir(name) / "oom_snapshot.pickle.zst").string());
}

/// Index of the last `oom` entry of device 0's trace.
inline std::size_t last_oom(const snapshot::Snapshot& snap) {
  const auto trace = snap.trace(0);
  std::size_t oom = trace.size();
  for (std::size_t i = 0; i < trace.size(); ++i)
    if (trace[i].action == snapshot::TraceAction::kOom) oom = i;
  return oom;
}

}  // namespace fragscope::testing
