#pragma once
/// @file step_telemetry.h
/// @brief One line of step telemetry JSONL: the fixtures' `steps.jsonl` schema, shared with the
/// Python hook (python/fragscope), which writes it.
///
/// Schema (docs/inputs.md has the full table): `step` (required), `seq_len`, `mbs`,
/// `optimizer_step`, `data_wait_ms`, `compute_ms`, `t`, memory_stats keys
/// ("allocated_bytes.all.current", "num_alloc_retries", ...), and the hook's optional fields
/// (`phase`, `rank`, `local_rank`, `tokens`, `max_seq_len`, `h2d_ms`, `queue_depth`,
/// `samples_per_s`, `tokens_per_s`, `step_time_ms`, `device_total_bytes`). Fields nobody here
/// knows are kept verbatim so a read → write round trip loses nothing.
///
/// A record is compact (a long job's steps.jsonl holds millions): its optional numbers take the
/// number's bytes (packed_optional.h), and the texts its lines repeat (the phase, the fields' names) are
/// shared by the records of a read (shared_text.h, field_map.h). sizeof(StepRecord) is 192 bytes, a
/// memory_stats value adds 16, any other field 40 (and its JSON text past 15 bytes): the hook's records
/// take 352 bytes for lines of ~530 (they took ~1.5 KB: a std::map node and a string per field).
/// Thread-safety: plain values.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "inputs/field_map.h"
#include "inputs/packed_optional.h"
#include "inputs/shared_text.h"
#include "util/job_phase.h"

namespace fragscope::inputs {

/// @brief The phase a record belongs to when it has no `phase` field.
inline constexpr std::string_view kDefaultPhase = phase_name(JobPhase::kTrain);

/// `phase` names are printed in tables: at most this long, without control characters.
inline constexpr std::size_t kMaxPhaseBytes = 64;

/// @brief Why `name` cannot be a phase name (a control character, a bidirectional override, bytes that are not
/// UTF-8, longer than kMaxPhaseBytes), empty when it can: a terminal acts on ESC and CSI, a newline forges a row.
std::string phase_name_problem(std::string_view name);

struct StepRecord {
  std::int64_t step = 0;  ///< micro-step index as the training loop counts it
  PackedOptional<std::int64_t> seq_len;
  PackedOptional<std::int64_t> mbs;  ///< micro-batch size (samples in this record)
  /// True when this micro-step ended with an optimizer step; absent = every record is one.
  std::optional<bool> optimizer_step;
  double data_wait_ms = 0;   ///< waiting for the input pipeline (absent = 0)
  double compute_ms = 0;     ///< forward/backward/optimizer until synchronised (absent = 0)
  PackedOptional<double> t;  ///< seconds since the run started, at the end of the record

  SharedText phase;  ///< a phase_name() or the job's own (absent = train)
  PackedOptional<int> rank;
  PackedOptional<int> local_rank;
  PackedOptional<std::int64_t> tokens;
  PackedOptional<std::int64_t> max_seq_len;
  PackedOptional<std::int64_t> queue_depth;         ///< batches ready ahead of the GPU
  PackedOptional<std::int64_t> device_total_bytes;  ///< HBM of the rank's GPU
  PackedOptional<double> h2d_ms;                    ///< host-to-device copy time
  PackedOptional<double> samples_per_s;
  PackedOptional<double> tokens_per_s;
  PackedOptional<double> step_time_ms;

  /// memory_stats keys as written ("reserved_bytes.all.peak" → bytes, "num_ooms" → count).
  FieldMap<std::int64_t> memory_stats;
  /// Fields this version does not interpret: name → the value's JSON text, unchanged.
  FieldMap<std::string> extra;

  std::size_t line = 0;  ///< 1-based line in its source (0 = not read from a file); not written

  /// @brief `phase`, or "train" when absent.
  std::string phase_or_default() const { return phase ? *phase : std::string(kDefaultPhase); }
  /// @brief Wall time of the record: `step_time_ms` when given, else data wait + H2D + compute.
  double step_time_or_sum_ms() const {
    return step_time_ms.value_or(data_wait_ms + h2d_ms.value_or(0.0) + compute_ms);
  }
  /// @brief A memory_stats value, or nullopt when this record does not carry it.
  std::optional<std::int64_t> memory_stat(std::string_view key) const {
    const std::int64_t* value = memory_stats.find(key);
    return value ? std::optional<std::int64_t>(*value) : std::nullopt;
  }
  /// @brief Heap bytes the record holds of its own (its fields' maps); the texts it shares not counted.
  std::size_t heap_bytes() const { return memory_stats.heap_bytes() + extra.heap_bytes(); }
};

/// @brief The memory `records` hold: each record, its heap_bytes(), and each text they share once.
std::size_t telemetry_footprint(std::span<const StepRecord> records);

/// @brief Σ data_wait_ms / Σ (data_wait_ms + compute_ms) over `records`, exactly as the
/// fixtures' truth.json defines `data_wait_fraction`.
/// @return nullopt when the denominator is 0 (no records, or no time recorded).
std::optional<double> data_wait_fraction(std::span<const StepRecord> records);

/// @brief The sums of data_wait_fraction, added over records held apart (each file of a run) without
/// joining them: joined, a run's records would be copied whole. Adding the parts in order gives
/// data_wait_fraction of them joined, bit for bit.
struct DataWaitSums {
  double wait = 0;
  double total = 0;
  void add(std::span<const StepRecord> records);
  /// @return nullopt when `total` is 0 (no records, or no time recorded).
  std::optional<double> fraction() const;
};

/// @brief True for keys that name memory_stats values in a telemetry line: dotted statistic
/// names ("segment.all.current"), "num_*" counters and "max_split_size".
bool is_memory_stats_key(std::string_view key);

}  // namespace fragscope::inputs
