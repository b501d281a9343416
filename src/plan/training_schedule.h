#pragma once
/// @file training_schedule.h
/// @brief The micro-steps a plan replays: the tokens per sequence of each, and the eval passes.
///
/// The planning schedules: fixed-length jobs run three optimizer steps (the first creates the
/// optimizer state; the allocator's cache is steady from the second on: replaying 2 to 10 steps
/// of every recorded shape gives the same peaks). Variable-length jobs run kLengthDraws seeded
/// draws of lengths from the spec's distribution (log-normal around median_seq_len with
/// length_sigma, clipped to [min_seq_len, seq_len], multiples of 8, as the fixtures' recorder
/// draws them), each kVariableLengthMicroSteps long in whole optimizer steps, the last
/// micro-step forced to seq_len: the longest sequence arriving with gradients and optimizer
/// state present. Reserved memory then depends on the order of the lengths (which blocks the
/// cache holds when a long one arrives): the plan keeps the draw that reserves the most. An
/// [eval] table adds an eval pass after every `every` optimizer steps.
///
/// Lengths are read one at a time, never all held: at grad_accum 2^20 a draw is 8 Mi micro-steps
/// (64 MiB as a list). An optimizer step draws at most kDrawnLengthsPerAccumulation lengths; past
/// them its micro-steps take the drawn lengths again in order (a loader cycling through a shard),
/// so its lengths from the second micro-step on repeat with that period, and a replay can pass
/// over whole periods that change nothing (training_replay.h) without drawing a length for each.
/// Up to grad_accum 16384 every length is drawn, as before.
/// Thread-safety: values; a Reader is one thread's.

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "plan/job_spec.h"

namespace fragscope::plan {

inline constexpr std::uint64_t kFixedLengthOptimizerSteps = 3;
inline constexpr std::uint64_t kVariableLengthMicroSteps = 128;  ///< at least 8 optimizer steps
inline constexpr std::uint64_t kLengthDraws = 4;
inline constexpr std::uint64_t kLengthSeed = 1234;  ///< draw k uses kLengthSeed + k
/// The most lengths an optimizer step draws: up to grad_accum 16384 every micro-step's is drawn.
inline constexpr std::uint64_t kDrawnLengthsPerAccumulation = 16384;

/// @brief A variable-length job's sequence lengths: the spec's, defaults filled in.
struct LengthDistribution {
  std::uint64_t shortest = 1;  ///< min_seq_len (seq_len / 16)
  std::uint64_t longest = 1;   ///< seq_len
  double median = 1;           ///< median_seq_len (seq_len / 4)
  double sigma = 0.6;          ///< length_sigma
};
LengthDistribution length_distribution(const JobSpec& spec);

/// @brief Lengths drawn one at a time with a seed (Box–Muller over mt19937_64: the same sequence
/// on every platform).
class LengthDraws {
 public:
  LengthDraws(const LengthDistribution& distribution, std::uint64_t seed);
  std::uint64_t next();

 private:
  LengthDistribution distribution_;
  std::mt19937_64 rng_;
};

/// @brief The tokens per sequence of each micro-step: one length repeated, seeded draws, or a
/// list (none by default).
class MicroStepLengths {
 public:
  MicroStepLengths() = default;
  /// @brief `count` micro-steps of `seq_len`.
  static MicroStepLengths repeated(std::uint64_t seq_len, std::uint64_t count);
  /// @brief `count` lengths drawn with `seed`, the last forced to the spec's seq_len: at most
  /// `drawn_per_accumulation` per optimizer step of the spec's grad_accum, which repeat after them.
  static MicroStepLengths drawn(const JobSpec& spec, std::uint64_t count, std::uint64_t seed,
                                std::uint64_t drawn_per_accumulation = kDrawnLengthsPerAccumulation);
  /// @brief These lengths (a recorded run's).
  static MicroStepLengths listed(std::vector<std::uint64_t> seq_lens);

  std::uint64_t count() const { return count_; }
  std::uint64_t longest() const;
  /// @brief P > 0 when, within each optimizer step, every micro-step's length is that of the one P
  /// before it (the schedule's last excepted: last_is_forced); 0 when no such period is known.
  /// REQUIRES (drawn): the optimizer steps are the spec's grad_accum micro-steps long.
  std::uint64_t period() const;
  /// @brief The last micro-step's length breaks the period (drawn: forced to seq_len).
  bool last_is_forced() const { return kind_ == Kind::kDrawn; }

  /// @brief Reads the lengths in order; REQUIRES: next() called at most count() times, and the
  /// lengths outlive the reader.
  class Reader {
   public:
    explicit Reader(const MicroStepLengths& lengths);
    std::uint64_t next();
    /// @brief Moves past `count` lengths without reading them. REQUIRES: each is the length one
    /// period (period()) before it, in the same optimizer step, and next() then reads at most count().
    void skip(std::uint64_t count) { read_ += count; }

   private:
    const MicroStepLengths& lengths_;
    std::uint64_t read_ = 0;
    std::optional<LengthDraws> draws_;
    std::vector<std::uint64_t> accumulation_;  // drawn: the current optimizer step's draws
  };

 private:
  enum class Kind : std::uint8_t { kRepeated, kDrawn, kListed };
  Kind kind_ = Kind::kListed;
  std::uint64_t count_ = 0;
  std::uint64_t seq_len_ = 0;  // repeated: every length; drawn: the last
  LengthDistribution distribution_;
  std::uint64_t seed_ = 0;
  std::uint64_t grad_accum_ = 1;  // drawn: micro-steps per optimizer step
  std::uint64_t drawn_per_accumulation_ = 0;
  std::vector<std::uint64_t> listed_;
};

struct TrainingSchedule {
  MicroStepLengths lengths;
  std::vector<std::uint32_t> eval_after;  ///< micro-steps (ending an optimizer step) followed by an eval pass
};

/// @brief The schedules `plan` replays for `spec` (see the file comment): one for fixed lengths,
/// kLengthDraws for variable lengths.
std::vector<TrainingSchedule> planning_schedules(const JobSpec& spec);

}  // namespace fragscope::plan
