#pragma once
/// @file rank_assignment.h
/// @brief Ranks for inputs whose paths and contents name none, so that runs from several nodes
/// or folders are never merged silently.
///
/// A rank comes from the telemetry's `rank` field, a `rank<N>` in the path, or a log line's
/// `[rankN]:` prefix. Inputs without one are told apart by content, then by folder:
/// - rank-less snapshots of one folder that trace different devices are different processes:
///   the device (the process's local rank) is the rank;
/// - rank-less inputs of one kind (snapshots, telemetry, memory_stats, memory_summary) in
///   several folders are several processes: each such folder is one rank, numbered after the
///   ranks already taken, in path order, and every rank-less input of that folder takes it (a
///   snapshot dumped twice, its stats and its telemetry are one process). Logs keep their
///   messages' ranks: a log often lives apart from the rest.
/// Each decision is a warning, and so is what stays merged: two inputs of one kind read as the
/// same rank from different folders, or a rank-less input left beside split folders.
/// Thread-safety: mutates `inputs` only.

#include "diagnose/doctor_inputs.h"

namespace fragscope::diagnose {

/// @brief Fills the missing ranks of `inputs` and appends to `inputs.warnings` (see above).
void assign_ranks(DoctorInputs& inputs);

}  // namespace fragscope::diagnose
