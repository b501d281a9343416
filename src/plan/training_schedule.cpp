#include "plan/training_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace fragscope::plan {

LengthDistribution length_distribution(const JobSpec& spec) {
  const TrainingConfig& t = spec.training;
  LengthDistribution d;
  d.longest = t.seq_len;
  d.shortest = t.min_seq_len.value_or(std::max<std::uint64_t>(1, d.longest / 16));
  d.median = static_cast<double>(t.median_seq_len.value_or(std::max<std::uint64_t>(1, d.longest / 4)));
  d.sigma = t.length_sigma.value_or(0.6);
  return d;
}

LengthDraws::LengthDraws(const LengthDistribution& distribution, std::uint64_t seed)
    : distribution_(distribution), rng_(seed) {}

std::uint64_t LengthDraws::next() {
  const LengthDistribution& d = distribution_;
  auto uniform = [&] { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; };  // [0, 1), portable
  // Box–Muller: the same draw on every platform
  const double u1 = 1.0 - uniform();
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * uniform());
  const double x = d.median * std::exp(d.sigma * z);
  const auto clipped =
      static_cast<std::uint64_t>(std::clamp(x, static_cast<double>(d.shortest), static_cast<double>(d.longest)));
  return std::max<std::uint64_t>(clipped / 8 * 8, std::min<std::uint64_t>(d.shortest, 8));
}

MicroStepLengths MicroStepLengths::repeated(std::uint64_t seq_len, std::uint64_t count) {
  MicroStepLengths l;
  l.kind_ = Kind::kRepeated;
  l.count_ = count;
  l.seq_len_ = seq_len;
  return l;
}

MicroStepLengths MicroStepLengths::drawn(const JobSpec& spec, std::uint64_t count, std::uint64_t seed,
                                         std::uint64_t drawn_per_accumulation) {
  MicroStepLengths l;
  l.kind_ = Kind::kDrawn;
  l.count_ = count;
  l.seq_len_ = spec.training.seq_len;
  l.distribution_ = length_distribution(spec);
  l.seed_ = seed;
  l.grad_accum_ = spec.training.grad_accum;
  l.drawn_per_accumulation_ = std::max<std::uint64_t>(1, drawn_per_accumulation);
  return l;
}

MicroStepLengths MicroStepLengths::listed(std::vector<std::uint64_t> seq_lens) {
  MicroStepLengths l;
  l.count_ = seq_lens.size();
  l.listed_ = std::move(seq_lens);
  return l;
}

std::uint64_t MicroStepLengths::longest() const {
  if (count_ == 0) return 0;
  if (kind_ == Kind::kListed) return *std::max_element(listed_.begin(), listed_.end());
  return seq_len_;  // draws are clipped to seq_len (validate: min and median ≤ seq_len), and the last is it
}

std::uint64_t MicroStepLengths::period() const {
  switch (kind_) {
    case Kind::kRepeated:
      return 1;
    case Kind::kDrawn:
      return grad_accum_ > drawn_per_accumulation_ ? drawn_per_accumulation_ : 0;
    case Kind::kListed:
      break;
  }
  return 0;
}

MicroStepLengths::Reader::Reader(const MicroStepLengths& lengths) : lengths_(lengths) {
  if (lengths.kind_ == Kind::kDrawn) draws_.emplace(lengths.distribution_, lengths.seed_);
}

std::uint64_t MicroStepLengths::Reader::next() {
  const std::uint64_t index = read_++;
  switch (lengths_.kind_) {
    case Kind::kRepeated:
      return lengths_.seq_len_;
    case Kind::kDrawn: {
      const std::uint64_t at = index % lengths_.grad_accum_, period = lengths_.drawn_per_accumulation_;
      const bool repeats = lengths_.grad_accum_ > period;
      if (repeats && at == 0) accumulation_.clear();
      std::uint64_t length = 0;
      if (at < period) {
        length = draws_->next();
        if (repeats) accumulation_.push_back(length);
      } else {
        length = accumulation_[at % period];
      }
      return index + 1 == lengths_.count_ ? lengths_.seq_len_ : length;
    }
    case Kind::kListed:
      break;
  }
  return lengths_.listed_[index];
}

std::vector<TrainingSchedule> planning_schedules(const JobSpec& spec) {
  const std::uint64_t ga = spec.training.grad_accum;
  std::vector<TrainingSchedule> out;
  if (spec.training.variable_length) {
    const std::uint64_t steps = std::max<std::uint64_t>(8, (kVariableLengthMicroSteps + ga - 1) / ga);
    for (std::uint64_t k = 0; k < kLengthDraws; ++k)
      out.push_back({MicroStepLengths::drawn(spec, steps * ga, kLengthSeed + k), {}});
  } else {
    out.push_back({MicroStepLengths::repeated(spec.training.seq_len, kFixedLengthOptimizerSteps * ga), {}});
  }
  if (spec.eval) {
    for (auto& s : out) {
      const std::uint64_t steps = s.lengths.count() / ga;
      for (std::uint64_t k = 1; k <= steps; ++k)
        if (k % spec.eval->every == 0 || k == steps) s.eval_after.push_back(static_cast<std::uint32_t>(k * ga - 1));
    }
  }
  return out;
}

}  // namespace fragscope::plan
