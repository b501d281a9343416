#pragma once
/// @file doctor_inputs.h
/// @brief Everything a user hands `fragscope doctor`: files and folders, each recognised by
/// its content (inputs/input_kind.h) and read by its reader.
///
/// Folders are walked (three levels deep: `run/rank3/steps.jsonl`), files in name order. A
/// file that is none of the known kinds is listed in `unrecognised`, not an error: a folder of
/// training output holds other files. A file of a known kind that its reader rejects is an
/// error (the user gave it; silently ignoring it would hide a broken artifact).
/// Thread-safety: plain values.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "inputs/memory_stats.h"
#include "inputs/memory_summary_reader.h"
#include "inputs/nvidia_smi_csv.h"
#include "inputs/oom_message.h"
#include "inputs/step_telemetry.h"
#include "snapshot/snapshot.h"

namespace fragscope::diagnose {

struct SnapshotInput {
  std::string path;
  std::optional<int> rank;  ///< from the path ("rank3.pickle", "rank3/snapshot.pickle")
  snapshot::Snapshot snapshot;
  int device = 0;                          ///< its busiest device: the one the doctor reads
  std::optional<std::size_t> oom_index;    ///< the last `oom` entry in that device's trace
};

struct TelemetryInput {
  std::string path;
  std::optional<int> rank;  ///< the records' `rank` field, else from the path
  std::vector<inputs::StepRecord> records;
};

struct MemoryStatsInput {
  std::string path;
  std::optional<int> rank;
  inputs::MemoryStats stats;
};

struct SmiInput {
  std::string path;
  inputs::SmiTable table;
};

struct SummaryInput {
  std::string path;
  std::optional<int> rank;
  inputs::MemorySummary summary;
};

struct LogInput {
  std::string path;
  std::vector<inputs::OomMessage> ooms;  ///< never empty
};

struct DoctorInputs {
  std::vector<SnapshotInput> snapshots;
  std::vector<TelemetryInput> telemetry;
  std::vector<MemoryStatsInput> stats;
  std::vector<SmiInput> smi;
  std::vector<SummaryInput> summaries;
  std::vector<LogInput> logs;
  std::vector<std::string> unrecognised;  ///< files that are none of the known kinds
  std::vector<std::string> warnings;      ///< how ranks were told apart, and what stays merged

  /// @brief True when at least one input was recognised.
  bool any() const;
};

/// @brief A rank number in a path: the last "rank<N>" (or "rank_<N>", "rank-<N>") in the
/// file name or its folders, case-insensitive. nullopt when there is none.
std::optional<int> rank_from_path(const std::string& path);

/// @brief Recognises and reads every file in `paths` (files, or folders walked as above), and
/// gives rank-less inputs their ranks (rank_assignment.h).
/// @throws InputError naming the path when one does not exist or cannot be read, or a
///         recognised file is malformed.
DoctorInputs collect_doctor_inputs(const std::vector<std::string>& paths);

}  // namespace fragscope::diagnose
