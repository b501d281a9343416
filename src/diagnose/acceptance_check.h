#pragma once
/// @file acceptance_check.h
/// @brief Evaluates a canary run's telemetry (all ranks) and optional nvidia-smi traces
/// against acceptance criteria: one result per rank and criterion, pass / fail / not evaluated.
///
/// Definitions (docs/criteria.md explains each with its reasons):
/// - A *step* is an optimizer step: consecutive train-phase records up to one with
///   `optimizer_step` true (records without the field are one step each). The first
///   `warmup_steps` steps are warm-up; *steady* records are the train records after them.
/// - HBM: max reserved_bytes.all.peak (else .current) over all of a rank's records / device
///   memory: the criteria's device_memory_bytes (the card the plan was made for), else the
///   telemetry's device_total_bytes, else nvidia-smi memory.total. When the telemetry's device
///   differs from the planned card by more than kDeviceMismatch, a warning says so.
/// - Data wait: data_wait_fraction over steady records.
/// - GPU idle: per GPU of an nvidia-smi trace (≥ kMinTraceSamples samples): share of samples
///   below kIdleUtilizationPercent within the busy window; without a usable trace, each rank's
///   data wait stands in.
/// - OOMs: max num_ooms; retries: num_alloc_retries at the end minus at the start (0 when the
///   telemetry starts at step 0, as the counter starts with the process).
/// - Required phases: over all ranks together (rank 0 alone may checkpoint).
/// - Spreads: (p90 − p10) / median over steady steps' wall time and samples/s (tokens/s when
///   records have no mbs); at least kMinSpreadSteps steady steps.
/// A criterion that the data cannot answer is kNotEvaluated with the reason; it fails the check
/// (a check that measured nothing must not pass) unless the caller allows unevaluated criteria.
/// A missing required phase fails it. Thread-safety: pure functions.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "inputs/acceptance_criteria.h"
#include "inputs/nvidia_smi_csv.h"
#include "inputs/step_telemetry.h"

namespace fragscope::diagnose {

/// The criteria file format lives with the other inputs (inputs/acceptance_criteria.h).
using inputs::AcceptanceCriteria;

inline constexpr double kIdleUtilizationPercent = 10.0;
inline constexpr std::size_t kMinTraceSamples = 10;
inline constexpr std::size_t kMinSpreadSteps = 3;
/// Relative difference between the telemetry's device and the planned card that is a different
/// card (cudaMemGetInfo's total runs ~0.5% under nvidia-smi's memory.total on the same card).
inline constexpr double kDeviceMismatch = 0.05;

/// @brief The telemetry of one rank.
struct RankTelemetry {
  int rank = 0;
  std::string source;  ///< file(s) the records came from
  std::vector<inputs::StepRecord> records;
};

/// @brief One telemetry file as read.
struct TelemetryFile {
  std::string source;
  std::vector<inputs::StepRecord> records;
};

/// @brief Splits files into ranks: a record's `rank` field, or for records without one, the
/// file's position among `files` (one file per rank, given in rank order). The records are moved,
/// never copied (a file of one rank hands its vector over whole), and keep their order in each rank;
/// a run's records are most of the check's memory.
/// @throws InputError when two files hold records of the same rank.
/// @return ranks in ascending order.
std::vector<RankTelemetry> group_by_rank(std::vector<TelemetryFile> files);

/// One criterion's outcome (the doctor's Verdict, in diagnosis.h, is a different thing).
enum class CriterionVerdict { kPass, kFail, kNotEvaluated };

struct CriterionResult {
  std::string criterion;  ///< the criteria file's key: "max_data_wait_fraction"
  std::string subject;    ///< "rank 0", "gpu 0 (smi_trace.csv)", "all ranks"
  std::optional<int> rank;
  CriterionVerdict verdict = CriterionVerdict::kNotEvaluated;
  std::optional<double> measured;  ///< in the criterion's own unit (fraction, count)
  std::optional<double> limit;
  std::string measured_text;  ///< for people: "92.8%", "0", "train"
  std::string limit_text;     ///< "≤ 10.0%", "train, eval, checkpoint"
  std::string detail;         ///< how it was measured, or why it was not
};

struct CheckInput {
  std::vector<RankTelemetry> ranks;
  std::vector<inputs::SmiTable> smi;  ///< nvidia-smi readings or traces (may be empty)
};

struct CheckReport {
  std::vector<CriterionResult> results;  ///< ranks in order, then GPUs, then run-wide rows
  std::vector<std::string> warnings;     ///< what the verdict alone does not say
  bool allow_unevaluated = false;        ///< a criterion not evaluated does not fail the check
  std::size_t count(CriterionVerdict verdict) const;
  /// @brief No criterion failed and, unless allow_unevaluated, none went unevaluated.
  bool passed() const {
    return count(CriterionVerdict::kFail) == 0 && (allow_unevaluated || count(CriterionVerdict::kNotEvaluated) == 0);
  }
};

/// @brief Reads what `fragscope check` is given: step telemetry files (split into ranks by
/// group_by_rank) and nvidia-smi CSV files.
/// @throws InputError naming the file that cannot be read, or as group_by_rank.
CheckInput read_check_input(const std::vector<std::string>& telemetry_paths,
                            const std::vector<std::string>& smi_paths);

/// @brief Evaluates every criterion. REQUIRES: `input.ranks` is not empty.
/// @param allow_unevaluated let criteria the data cannot answer pass (`check --allow-unevaluated`).
CheckReport check_acceptance(const AcceptanceCriteria& criteria, const CheckInput& input,
                             bool allow_unevaluated = false);

/// @brief Human name of a criterion key ("max_hbm_fraction" → "HBM peak").
std::string_view criterion_label(std::string_view criterion);

/// @brief "pass", "FAIL", "not evaluated".
std::string_view verdict_text(CriterionVerdict verdict);

}  // namespace fragscope::diagnose
