#pragma once
/// @file acceptance_criteria.h
/// @brief The acceptance criteria file: written by `fragscope plan --canary`, read by
/// `fragscope check` (format documented in docs/criteria.md).
///
/// One JSON object; "version" is required, every other key optional with the defaults below;
/// an unknown key is an error naming it, so a typo never silently loosens a gate.
/// Thread-safety: a plain value.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/job_phase.h"

namespace fragscope::inputs {

inline constexpr int kAcceptanceCriteriaVersion = 1;

struct AcceptanceCriteria {
  int version = kAcceptanceCriteriaVersion;
  /// HBM per GPU, used when telemetry carries no device_total_bytes.
  std::optional<std::uint64_t> device_memory_bytes;
  double max_hbm_fraction = 0.90;        ///< reserved_bytes.all.peak / device memory, each rank
  double max_data_wait_fraction = 0.10;  ///< Σ data_wait / Σ (data_wait + compute), each rank
  double max_gpu_idle_fraction = 0.10;   ///< nvidia-smi idle share; data wait without a trace
  bool allow_oom = false;                ///< false: num_ooms must stay 0
  std::int64_t max_alloc_retries = 0;    ///< num_alloc_retries increase over the run
  std::vector<std::string> required_phases = hook_phase_names();
  double max_step_time_spread = 0.15;   ///< (p90 − p10) / median of steady step times
  double max_throughput_spread = 0.15;  ///< the same for samples/s (or tokens/s)
  std::int64_t warmup_steps = 2;        ///< first optimizer steps left out of rate criteria
};

/// @brief Parses criteria JSON; `source` names it in errors.
/// @throws InputError "SOURCE: ..." on invalid JSON, a missing or unsupported "version", an
/// unknown key, or a value of the wrong type or range (naming the key).
AcceptanceCriteria parse_acceptance_criteria(std::string_view json_text, std::string_view source);

/// @brief Reads the criteria file at `path`.
AcceptanceCriteria read_acceptance_criteria_file(const std::filesystem::path& path);

/// @brief `criteria` as a JSON object with every key, in the file's order.
nlohmann::ordered_json acceptance_criteria_json(const AcceptanceCriteria& criteria);

/// @brief Writes acceptance_criteria_json(criteria) pretty-printed, then '\n': the criteria
/// file. Parsing the output gives `criteria` back.
void write_acceptance_criteria(std::ostream& out, const AcceptanceCriteria& criteria);

}  // namespace fragscope::inputs
