#pragma once
/// @file doctor_inputs.h
/// @brief Everything a user hands `fragscope doctor`: files and folders, each recognised by
/// its content (inputs/input_kind.h) and read by its reader.
///
/// Folders are walked (three levels deep: `run/rank3/steps.jsonl`), files in name order, at most
/// kMaxWalkedFiles in all. A walk follows a symlinked folder only within the folder given (a
/// link to `/` is not a way out) and reads only regular files: FIFOs, devices and sockets are
/// skipped with a note, as are links that lead nowhere. A file that is none of the known kinds
/// is listed in `unrecognised`, not an error: a folder of training output holds other files.
/// A file of a known kind that its reader rejects (a half-dumped snapshot, a malformed CSV) is
/// skipped and listed in `skipped` with the reader's reason: one damaged file does not stop the
/// diagnosis; the report names it (the user gave it; silence would hide a broken artifact).
/// Thread-safety: plain values.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "inputs/library_alloc_failure.h"
#include "inputs/memory_stats.h"
#include "inputs/memory_summary_reader.h"
#include "inputs/nvidia_smi_csv.h"
#include "inputs/oom_message.h"
#include "inputs/step_telemetry.h"
#include "snapshot/read_limits.h"
#include "snapshot/snapshot.h"
#include "snapshot/survived_oom.h"
#include "util/output_file.h"
#include "util/progress.h"

namespace fragscope::diagnose {

/// @brief A log that says cuDNN found no plan to run a convolution (inputs/training_log.h).
struct CudnnNoPlanInput {
  std::string path;
  std::size_t line = 0;     ///< 1-based, the last such line
  std::optional<int> rank;  ///< its rank prefix: it tells only that rank's snapshots how the run ended
};

struct SnapshotInput {
  std::string path;
  std::optional<int> rank;  ///< from the path ("rank3.pickle", "rank3/snapshot.pickle")
  snapshot::Snapshot snapshot;
  int device = 0;                          ///< its busiest device: the one the doctor reads
  /// The log line of its rank saying cuDNN found no plan, when one does: it tells how the run ended.
  std::optional<CudnnNoPlanInput> cudnn_no_plan;
  std::optional<std::size_t> oom_index;    ///< the `oom` entry the run died of (snapshot/survived_oom.h)
  snapshot::SurvivedOoms survived;         ///< the `oom` entries the run went on from

  /// @brief How the run ended as its logs tell it: it picks the fatal OOM above, and the replay's
  /// (replay::prepare_trace).
  snapshot::RunEnd run_end() const {
    return cudnn_no_plan ? snapshot::RunEnd::kCudnnFoundNoPlan : snapshot::RunEnd::kUnknown;
  }
};

struct TelemetryInput {
  std::string path;
  std::optional<int> rank;  ///< the records' `rank` field, else from the path
  std::vector<inputs::StepRecord> records;
  std::optional<std::size_t> cut_last_line;  ///< a last line cut off by a crash, left out
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

/// @brief A log in which a CUDA library could not get device memory of its own (cuBLAS, cuDNN, ...).
struct LibraryFailureInput {
  std::string path;
  std::vector<inputs::LibraryAllocFailure> failures;  ///< never empty
};

/// @brief An input that was not used, and why (one line, without the path).
struct SkippedInput {
  std::string path;
  std::string reason;
};

/// @brief The most files a doctor run looks at in the folders it walks.
inline constexpr std::size_t kMaxWalkedFiles = 10000;

struct DoctorInputs {
  std::vector<SnapshotInput> snapshots;
  std::vector<TelemetryInput> telemetry;
  std::vector<MemoryStatsInput> stats;
  std::vector<SmiInput> smi;
  std::vector<SummaryInput> summaries;
  std::vector<LogInput> logs;
  std::vector<LibraryFailureInput> library_failures;
  std::vector<CudnnNoPlanInput> cudnn_no_plan;
  std::vector<std::string> unrecognised;  ///< files that are none of the known kinds
  std::vector<SkippedInput> skipped;      ///< damaged or special files, and why each was left out
  std::vector<std::string> warnings;      ///< how ranks were told apart, and what stays merged
  /// Every file looked at (the CLI never writes a report onto one of them).
  std::vector<FileIdentity> files;

  /// @brief True when at least one input was recognised.
  bool any() const;
};

/// @brief Whether inputs of ranks `a` and `b` may come from one process: the same rank, or either unknown.
inline bool may_be_same_rank(const std::optional<int>& a, const std::optional<int>& b) { return !a || !b || a == b; }

/// @brief A rank number in a path: the last "rank<N>" (or "rank_<N>", "rank-<N>") in the
/// file name or its folders, case-insensitive. nullopt when there is none.
std::optional<int> rank_from_path(const std::string& path);

/// @brief Recognises and reads every file in `paths` (files, or folders walked as above), snapshots
/// within `limits`, and gives rank-less inputs their ranks (rank_assignment.h).
/// `progress` hears of each snapshot read, a task "reading PATH" counted in bytes.
/// @throws InputError naming the path when one given does not exist or a folder cannot be listed
///         (a file that cannot be read is skipped, above).
DoctorInputs collect_doctor_inputs(const std::vector<std::string>& paths, const snapshot::ReadLimits& limits = {},
                                   const Progress& progress = {});

}  // namespace fragscope::diagnose
