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
/// (64 MiB as a list).
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
  /// @brief `count` lengths drawn with `seed`, the last forced to the spec's seq_len.
  static MicroStepLengths drawn(const JobSpec& spec, std::uint64_t count, std::uint64_t seed);
  /// @brief These lengths (a recorded run's).
  static MicroStepLengths listed(std::vector<std::uint64_t> seq_lens);

  std::uint64_t count() const { return count_; }
  std::uint64_t longest() const;

  /// @brief Reads the lengths in order; REQUIRES: next() called at most count() times, and the
  /// lengths outlive the reader.
  class Reader {
   public:
    explicit Reader(const MicroStepLengths& lengths);
    std::uint64_t next();

   private:
    const MicroStepLengths& lengths_;
    std::uint64_t read_ = 0;
    std::optional<LengthDraws> draws_;
  };

 private:
  enum class Kind : std::uint8_t { kRepeated, kDrawn, kListed };
  Kind kind_ = Kind::kListed;
  std::uint64_t count_ = 0;
  std::uint64_t seq_len_ = 0;  // repeated: every length; drawn: the last
  LengthDistribution distribution_;
  std::uint64_t seed_ = 0;
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
